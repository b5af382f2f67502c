// A counter every runtime can run (Node, Bun; CommonJS, no test framework), for the
// binaries that run only under an emulator here (scripts/run-emulated.mjs):
//
//   <runtime> counter.cjs DIST COUNTER SECTIONS PROCESSES
//
// starts PROCESSES children of this same runtime (process.execPath), each doing SECTIONS
// read-increment-write sections under withFileLock, and exits 0 only if the counter ends
// at exactly PROCESSES × SECTIONS, every child exited 0, and the addon every process
// loaded is the one for this runtime's platform (EXACTLOCK_EXPECT_BINARY, a file name).
"use strict";
const fs = require("node:fs");
const { spawn } = require("node:child_process");

const [dist, counter, sections, processes] = process.argv.slice(2);
const lib = require(`${dist}/index.js`);

/** The exactlock .node files mapped into this process (Linux: /proc/self/maps; Windows: Node's report of its DLLs). */
function loadedBinaries() {
  const files =
    process.platform === "win32"
      ? process.report.getReport().sharedObjects.map((file) => file.replaceAll("\\", "/"))
      : fs.readFileSync("/proc/self/maps", "utf8").split("\n").map((line) => line.split(/\s+/)[5]);
  return [...new Set(files.filter((file) => file && /exactlock[^/]*\.node$/.test(file)))];
}

function checkLoaded(who) {
  const expected = process.env.EXACTLOCK_EXPECT_BINARY;
  const loaded = loadedBinaries();
  if (expected && !(loaded.length === 1 && loaded[0].endsWith(`/${expected}`))) {
    throw new Error(`${who} loaded ${JSON.stringify(loaded)}, not ${expected}`);
  }
  return loaded;
}

async function child() {
  for (let i = 0; i < Number(sections); i++) {
    await lib.withFileLock(
      counter,
      () => {
        const value = Number(fs.readFileSync(counter, "utf8"));
        fs.writeFileSync(counter, String(value + 1));
      },
      { retries: Infinity },
    );
  }
  checkLoaded(`child ${process.pid}`);
}

async function parent() {
  fs.writeFileSync(counter, "0");
  const started = Date.now();
  const exits = await Promise.all(
    Array.from({ length: Number(processes) }, () =>
      new Promise((resolve) => {
        spawn(process.execPath, [__filename, dist, counter, sections], { stdio: "inherit" }).on("exit", (code, signal) =>
          resolve(code === 0 ? 0 : code ?? signal),
        );
      }),
    ),
  );
  lib.acquireLockSync(counter, { retries: 0 })();
  const loaded = checkLoaded("parent");
  const final = fs.readFileSync(counter, "utf8");
  const expected = String(Number(processes) * Number(sections));
  const runtime = process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`;
  console.log(
    `counter: ${runtime} ${process.arch}, loaded ${loaded.join(" ")}; ${processes} processes × ${sections} sections: ` +
      `exits ${JSON.stringify(exits)}, counter ${final} (expected ${expected}), ${Date.now() - started} ms`,
  );
  process.exitCode = final === expected && exits.every((exit) => exit === 0) ? 0 : 1;
}

(processes ? parent() : child()).catch((error) => {
  console.error(error);
  process.exit(2);
});
