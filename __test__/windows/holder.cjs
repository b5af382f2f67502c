// A holder for the Windows suite (lock.test.mjs): acquires FILE's lock, writes "held <pid>"
// to READY, then holds until it is killed or HOLD_MS pass; with OPEN_INFO instead of a lock,
// it opens that file (the lock's record) and keeps it open for HOLD_MS; with CWD-LOCK, it
// makes the lock directory its current directory for HOLD_MS (as a shell `cd`'d there does).
//
//   node holder.cjs DIST FILE READY HOLD_MS [open-info | cwd-lock]
"use strict";
const fs = require("node:fs");

const [dist, file, ready, holdMs, mode] = process.argv.slice(2);

async function main() {
  if (mode === "open-info") {
    const fd = fs.openSync(`${file}.lock/info`, "r");
    fs.writeFileSync(ready, `open ${process.pid}`);
    setTimeout(() => fs.closeSync(fd), Number(holdMs));
    return;
  }
  if (mode === "cwd-lock") {
    process.chdir(`${file}.lock`);
    fs.writeFileSync(ready, `open ${process.pid}`);
    setTimeout(() => process.chdir(".."), Number(holdMs));
    return;
  }
  const lib = require(`${dist}/index.js`);
  const release = await lib.acquireLock(file, { retries: 0 });
  fs.writeFileSync(ready, `held ${process.pid}`);
  setTimeout(() => release().then(() => process.exit(0)), Number(holdMs));
}

main().catch((error) => {
  fs.writeFileSync(ready, `error ${error && error.code} ${error && error.message}`);
  process.exit(2);
});
