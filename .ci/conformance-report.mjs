// Reads the conformance suite's results of each way, prints the per-check table and the
// counts, and checks them against tests/conformance/expected-pass.txt (see .ci/conformance).
//
// node conformance-report.mjs EXPECTED_FILE UPDATE(0|1) WAY=OUT_DIR=SUITE_LOG ...
// The first way is the fixture directly: every check of it must pass. The others are
// toolgate ways: every check listed for them in EXPECTED_FILE must pass. A check is
// `scenario/check-id`; only SUCCESS passes (FAILURE, WARNING, or no such check do not).
// Exit code: 0 all good, 1 a required check did not pass, 2 the results could not be read.
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [expectedFile, update, ...wayArgs] = process.argv.slice(2);
const ways = wayArgs.map((arg) => {
  const [name, dir, log] = arg.split("=");
  return { name, dir, log };
});
const [direct, ...gated] = ways;

function fail(message) {
  console.error(`conformance: ${message}`);
  process.exit(2);
}

// `server-<scenario>-<ISO time with : and . as ->`, as the suite names its output folders.
const FOLDER = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/;

/** Map of check key → {status, message} for one way, plus the scenarios its log ran. */
function readWay(way) {
  if (!existsSync(way.log)) fail(`${way.name}: no suite log at ${way.log}`);
  const ran = [...readFileSync(way.log, "utf8").matchAll(/^=== Running scenario: (\S+) ===$/gm)].map(
    (m) => m[1],
  );
  const checks = new Map();
  const seen = new Set();
  for (const folder of existsSync(way.dir) ? readdirSync(way.dir) : []) {
    const match = FOLDER.exec(folder);
    const file = join(way.dir, folder, "checks.json");
    if (!match || !existsSync(file)) continue;
    const scenario = match[1];
    seen.add(scenario);
    let list;
    try {
      list = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      fail(`${way.name}: cannot read ${file}: ${e.message}`);
    }
    for (const check of list) {
      // INFO checks are logs of the exchange; the suite counts only these three.
      if (!["SUCCESS", "FAILURE", "WARNING"].includes(check.status)) continue;
      // A failed tool call's own text says more than "Server did not request sampling".
      const toolText = check.details?.result?.content?.[0]?.text;
      const said = check.status !== "SUCCESS" && typeof toolText === "string" ? ` (tool said: ${toolText})` : "";
      checks.set(`${scenario}/${check.id}`, {
        status: check.status,
        message: `${check.errorMessage ?? ""}${said}`.replace(/\s+/g, " "),
      });
    }
  }
  if (ran.length === 0) fail(`${way.name}: the suite ran no scenario (see ${way.log})`);
  // A scenario that threw before saving its results (the suite logs it) fails as a whole.
  for (const scenario of ran) {
    if (!seen.has(scenario)) {
      checks.set(`${scenario}/(no results)`, {
        status: "FAILURE",
        message: `the scenario saved no results (see ${way.log})`,
      });
    }
  }
  return { ...way, checks, ran };
}

const results = ways.map(readWay);
const [directResult, ...gatedResults] = results;

// Rows: every check of the direct run, then checks only the other ways reported (a
// scenario that stopped early reports e.g. `elicitation-sep1034-general` instead).
const keys = [...directResult.checks.keys()];
for (const result of gatedResults) {
  for (const key of result.checks.keys()) if (!keys.includes(key)) keys.push(key);
}
const scenarioOf = (key) => key.slice(0, key.indexOf("/"));
const order = new Map(directResult.ran.map((s, i) => [s, i]));
keys.sort((a, b) => (order.get(scenarioOf(a)) ?? 1e9) - (order.get(scenarioOf(b)) ?? 1e9));

const SHORT = { SUCCESS: "PASS", FAILURE: "FAIL", WARNING: "WARN" };
const cell = (result, key) => SHORT[result.checks.get(key)?.status] ?? "-";
const passes = (result, key) => result.checks.get(key)?.status === "SUCCESS";

/** Why `key` did not pass in `result`: its message, or the failure that stopped its scenario. */
function reason(result, key) {
  const check = result.checks.get(key);
  if (check) return check.message || check.status;
  const scenario = scenarioOf(key);
  for (const [other, c] of result.checks) {
    if (scenarioOf(other) === scenario && c.status !== "SUCCESS") {
      return `not reported (${other.slice(scenario.length + 1)}: ${c.message})`;
    }
  }
  return "not reported";
}

const width = Math.max(...keys.map((k) => k.length), 5);
const columns = results.map((r) => Math.max(r.name.length, 4));
const row = (first, cells, last) =>
  [first.padEnd(width), ...cells.map((c, i) => c.padEnd(columns[i])), last].join("  ").trimEnd();
console.log(row("check", results.map((r) => r.name), "why not (first way that fails)"));
for (const key of keys) {
  // A reported failure explains more than an absent check.
  const failing =
    results.find((r) => r.checks.has(key) && !passes(r, key)) ?? results.find((r) => !passes(r, key));
  const why = failing ? `${failing.name}: ${reason(failing, key)}` : "";
  console.log(row(key, results.map((r) => cell(r, key)), why.length > 160 ? `${why.slice(0, 157)}...` : why));
}

// The suite's own totals count reported checks; "of N" counts the direct run's checks.
console.log("");
const total = directResult.checks.size;
for (const result of results) {
  const statuses = [...result.checks.values()].map((c) => c.status);
  const count = (s) => statuses.filter((x) => x === s).length;
  const passed = [...directResult.checks.keys()].filter((k) => passes(result, k)).length;
  console.log(
    `${result.name}: ${passed} of ${total} checks pass` +
      ` (suite: ${count("SUCCESS")} passed, ${count("FAILURE")} failed, ${count("WARNING")} warnings)`,
  );
}

let broken = false;
const directFailures = [...directResult.checks.keys()].filter((k) => !passes(directResult, k));
if (directFailures.length > 0) {
  broken = true;
  console.log(`\nFAILED: ${directFailures.length} checks fail against the fixture directly:`);
  for (const key of directFailures) console.log(`  ${key}: ${reason(directResult, key)}`);
}

// The expected file: `WAY scenario/check-id` per line, `#` comments.
const header = [];
const expected = new Set();
const text = existsSync(expectedFile) ? readFileSync(expectedFile, "utf8") : "";
let inHeader = true;
for (const [index, raw] of text.split("\n").entries()) {
  const line = raw.trim();
  if (line.startsWith("#") || line === "") {
    if (inHeader && line !== "") header.push(raw);
    continue;
  }
  inHeader = false;
  const [way, key, extra] = line.split(/\s+/);
  if (!gated.some((w) => w.name === way) || !key || extra !== undefined) {
    fail(`${expectedFile}:${index + 1}: expected "WAY scenario/check-id" with WAY one of ` +
      `${gated.map((w) => w.name).join(", ")}; got ${JSON.stringify(raw)}`);
  }
  expected.add(`${way} ${key}`);
}

const passingNow = [];
for (const result of gatedResults) {
  for (const key of keys) if (passes(result, key)) passingNow.push(`${result.name} ${key}`);
}
const newlyPassing = passingNow.filter((entry) => !expected.has(entry));
const nowFailing = [...expected].filter((entry) => !passingNow.includes(entry));

if (update === "1") {
  if (directFailures.length > 0) fail("not updating the expected list while the fixture fails");
  writeFileSync(expectedFile, [...header, ...passingNow, ""].join("\n"));
  console.log(`\nwrote ${expectedFile}: ${passingNow.length} checks`);
  for (const entry of newlyPassing) console.log(`  added   ${entry}`);
  for (const entry of nowFailing) console.log(`  REMOVED ${entry} (it passed before)`);
  process.exit(0);
}

if (newlyPassing.length > 0) {
  console.log(`\nnewly passing, not yet in ${expectedFile} (add with .ci/conformance --update-expected):`);
  for (const entry of newlyPassing) console.log(`  ${entry}`);
}
if (nowFailing.length > 0) {
  broken = true;
  console.log(`\nFAILED: ${nowFailing.length} checks listed in ${expectedFile} do not pass:`);
  for (const entry of nowFailing) {
    const [way, key] = entry.split(" ");
    const result = gatedResults.find((r) => r.name === way);
    const why = keys.includes(key) ? reason(result, key) : "no way reported such a check (a typo?)";
    console.log(`  ${entry}: ${why}`);
  }
}
console.log(
  `\nconformance: ${broken ? "FAILED" : "ok"} (${passingNow.length} checks pass through toolgate, ` +
    `${expected.size} expected)`,
);
process.exit(broken ? 1 : 0);
