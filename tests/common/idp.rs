//! A test identity provider: real RSA and EC keys, an HTTP server with OpenID discovery and a JWKS (rotatable, fetches counted), and signed JWTs.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use aws_lc_rs::{
    encoding::AsDer,
    rand::SystemRandom,
    rsa::{KeyPair as RsaKeyPair, KeySize},
    signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair},
};
use axum::{Json, extract::State, routing::get};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header, jwk::Jwk};
use serde_json::{Value, json};

/// A private key the IdP signs with, and its public JWK.
pub struct SigningKey {
    pub kid: String,
    pub alg: Algorithm,
    encoding: EncodingKey,
    pub jwk: Value,
}

impl SigningKey {
    /// A fresh 2048-bit RSA key for RS256.
    pub fn rsa(kid: &str) -> Self {
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA key");
        let pkcs8 = pair.as_der().expect("PKCS#8");
        // jsonwebtoken's aws-lc backend takes RSA keys as PKCS#1 (RFC 8017) DER.
        Self::new(
            kid,
            Algorithm::RS256,
            EncodingKey::from_rsa_der(&pkcs1_of(pkcs8.as_ref())),
        )
    }

    /// A fresh P-256 key for ES256.
    pub fn ec(kid: &str) -> Self {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .expect("EC key");
        Self::new(
            kid,
            Algorithm::ES256,
            EncodingKey::from_ec_der(pkcs8.as_ref()),
        )
    }

    fn new(kid: &str, alg: Algorithm, encoding: EncodingKey) -> Self {
        let mut jwk = Jwk::from_encoding_key(&encoding, alg).expect("public JWK");
        jwk.common.key_id = Some(kid.to_owned());
        let mut jwk = serde_json::to_value(&jwk).expect("JWK as JSON");
        jwk["use"] = "sig".into();
        Self {
            kid: kid.to_owned(),
            alg,
            encoding,
            jwk,
        }
    }

    /// A JWT of `claims`, signed with this key, naming it by `kid`.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// Signed with this key, but naming `kid` (another key's, or none published).
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("sign")
    }
}

/// An unsigned token (`alg: none`), as an attacker would write it.
pub fn unsigned(kid: &str, claims: &Value) -> String {
    let header = json!({"alg": "none", "typ": "JWT", "kid": kid});
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// An HS256 token whose "secret" is `key`'s public JWK: the key-confusion attack on a
/// verifier that lets the token choose the algorithm.
pub fn hmac_with_public_key(key: &SigningKey, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(key.kid.clone());
    let secret = EncodingKey::from_secret(key.jwk.to_string().as_bytes()).expect("HMAC key");
    jsonwebtoken::encode(&header, claims, &secret).expect("sign HS256")
}

struct Published {
    jwks: Mutex<Vec<Value>>,
    fetches: AtomicUsize,
    issuer: Mutex<String>,
}

/// The IdP's HTTP server; it lives as long as the test's runtime.
pub struct Idp {
    /// `http://127.0.0.1:PORT/realms/test`, as Keycloak shapes it.
    pub issuer: String,
    published: Arc<Published>,
}

impl Idp {
    /// Serves OpenID discovery under the issuer and the key set at `/certs`, publishing `keys`.
    pub async fn start(keys: &[&SigningKey]) -> Self {
        let published = Arc::new(Published {
            jwks: Mutex::new(keys.iter().map(|k| k.jwk.clone()).collect()),
            fetches: AtomicUsize::new(0),
            issuer: Mutex::default(),
        });
        let app = axum::Router::new()
            .route(
                "/realms/test/.well-known/openid-configuration",
                get(|State(p): State<Arc<Published>>| async move {
                    let issuer = p.issuer.lock().unwrap().clone();
                    Json(json!({
                        "issuer": issuer,
                        "jwks_uri": format!("{issuer}/protocol/openid-connect/certs"),
                        "authorization_endpoint": format!("{issuer}/protocol/openid-connect/auth"),
                        "token_endpoint": format!("{issuer}/protocol/openid-connect/token"),
                    }))
                }),
            )
            .route(
                "/realms/test/protocol/openid-connect/certs",
                get(|State(p): State<Arc<Published>>| async move {
                    p.fetches.fetch_add(1, Ordering::SeqCst);
                    Json(json!({"keys": *p.jwks.lock().unwrap()}))
                }),
            )
            .with_state(published.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}/realms/test", listener.local_addr().unwrap());
        *published.issuer.lock().unwrap() = issuer.clone();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { issuer, published }
    }

    /// Replaces the published key set (a rotation).
    pub fn publish(&self, keys: &[&SigningKey]) {
        *self.published.jwks.lock().unwrap() = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    /// How often the key set was fetched.
    pub fn fetches(&self) -> usize {
        self.published.fetches.load(Ordering::SeqCst)
    }

    /// Claims this IdP issues: `iss`, `aud`, `sub`, `iat`, `exp` (in 10 minutes), plus `extra`.
    pub fn claims(&self, audience: &str, subject: &str, extra: Value) -> Value {
        let now = now();
        let mut claims = json!({
            "iss": self.issuer,
            "aud": audience,
            "sub": subject,
            "iat": now,
            "exp": now + 600,
        });
        if let (Some(claims), Value::Object(extra)) = (claims.as_object_mut(), extra) {
            claims.extend(extra);
        }
        claims
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

/// The RSAPrivateKey inside a PKCS#8 PrivateKeyInfo: its last element, an OCTET STRING.
fn pkcs1_of(pkcs8: &[u8]) -> Vec<u8> {
    let (_, info, _) = der_element(pkcs8);
    let (_, _version, rest) = der_element(info);
    let (_, _algorithm, rest) = der_element(rest);
    let (tag, key, _) = der_element(rest);
    assert_eq!(tag, 0x04, "PKCS#8 holds the key in an OCTET STRING");
    key.to_vec()
}

/// The DER element at the start of `der`: (tag, contents, what follows).
fn der_element(der: &[u8]) -> (u8, &[u8], &[u8]) {
    let (len, header) = match der[1] {
        short if short < 0x80 => (short as usize, 2),
        long => {
            let count = (long & 0x7f) as usize;
            let len = der[2..2 + count]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | *b as usize);
            (len, 2 + count)
        }
    };
    (der[0], &der[header..header + len], &der[header + len..])
}
