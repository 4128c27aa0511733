//! A reload's changes to the registry: new profiles and naming over the tools already imported, new limits.

use std::sync::Arc;

use rmcp::model::Tool;

use super::Registry;
use crate::config::{CodeSettings, PrefixPolicy, Profile, Retry, ServerId};

impl Registry {
    /// A reload: new prefix policy, profiles and code settings over the tools imported so
    /// far (the caller removes the servers that went), and rebuilds.
    pub fn reconfigure(&mut self, policy: PrefixPolicy, profiles: &[Profile], code: CodeSettings) {
        let fresh = Registry::new(policy, profiles);
        self.policy = policy;
        self.profiles = fresh.profiles;
        self.code = code;
        // A `run_code` description may follow the old settings: none is reused.
        self.views = Arc::default();
        self.rebuild();
    }

    /// Sets every imported tool's timeout and retry from `limits` (a reload changed them);
    /// rebuilds when one changed. Views already handed out keep their policies.
    pub fn retime(&mut self, limits: impl Fn(&ServerId, &Tool) -> (u64, Option<Retry>)) {
        let mut changed = false;
        for (server, slots) in &mut self.servers {
            for slot in slots {
                let (timeout_ms, retry) = limits(server, slot.tool());
                changed |= slot.retime(timeout_ms, retry);
            }
        }
        if changed {
            self.rebuild();
        }
    }
}
