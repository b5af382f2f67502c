// One process of a "host" in the filesystem matrix and the two-hosts suite (a holder
// driven over stdin is __test__/fixtures/holder.mjs, shared with the other suites).
//
//   node host-worker.mjs acquire FILE [OPTIONS_JSON]
//       acquires once, releases, prints ONE JSON line and exits 0:
//       {"ok":true,"pid":…,"acquiredAt":<wall ms>} or
//       {"ok":false,"pid":…,"code":…,"message":…,"holderInfo":…}
//   node host-worker.mjs counter FILE OPTIONS_JSON COUNTER MARKER SECTIONS
//       prints `ready`, waits for a `go` line, then runs SECTIONS read-increment-write
//       sections under withFileLock (an O_EXCL MARKER proves nobody else is inside),
//       prints {"pid":…,"sections":…,"violations":…} and exits 0. COUNTER holds a decimal
//       number, written zero-padded to 12 digits (its size never changes).
//
// `pid` is the pid this process sees for itself (namespace-local in a pid namespace);
// wall-clock stamps are `performance.timeOrigin + performance.now()`, comparable across
// processes of one machine whatever their namespaces.
import * as fs from "node:fs";
import * as readline from "node:readline";
import { acquireLock, withFileLock } from "../../dist/index.js";

const [mode, file, optionsJson, ...rest] = process.argv.slice(2);
const options = optionsJson ? JSON.parse(optionsJson) : {};
const now = () => performance.timeOrigin + performance.now();
const say = (line) => process.stdout.write(`${line}\n`);
const failure = (error) => ({
  ok: false,
  pid: process.pid,
  code: error?.code,
  message: String(error?.message ?? error),
  holderInfo: error?.holderInfo ?? null,
});

if (mode === "acquire") {
  let acquiredAt = 0;
  try {
    const release = await acquireLock(file, { ...options, onAcquired: () => (acquiredAt = now()) });
    await release();
    say(JSON.stringify({ ok: true, pid: process.pid, acquiredAt }));
  } catch (error) {
    say(JSON.stringify(failure(error)));
  }
  process.exit(0);
} else if (mode === "counter") {
  const [counter, marker, sectionsArg] = rest;
  const sections = Number(sectionsArg);
  const { O_CREAT, O_EXCL, O_WRONLY } = fs.constants;
  let done = 0;
  let violations = 0;
  const section = async () => {
    let fd;
    try {
      fd = fs.openSync(marker, O_CREAT | O_EXCL | O_WRONLY, 0o600);
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
      violations += 1;
    }
    try {
      const value = Number(fs.readFileSync(counter, "utf8"));
      await new Promise((resolve) => setImmediate(resolve));
      // Fixed width: a reader through a network client whose cached size lags sees all the digits.
      fs.writeFileSync(counter, String(value + 1).padStart(12, "0"));
      done += 1;
    } finally {
      if (fd !== undefined) {
        fs.closeSync(fd);
        fs.unlinkSync(marker);
      }
    }
  };
  readline.createInterface({ input: process.stdin }).once("line", async () => {
    try {
      for (let i = 0; i < sections; i += 1) await withFileLock(file, section, options);
      say(JSON.stringify({ pid: process.pid, sections: done, violations }));
      process.exit(0);
    } catch (error) {
      say(`error ${error?.code ?? "?"} ${String(error?.message ?? error).replace(/\n/g, " ")}`);
      process.exit(1);
    }
  });
  say("ready");
} else {
  say(`error EUSAGE unknown mode ${mode}`);
  process.exit(2);
}
