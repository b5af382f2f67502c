// One process of the fenced-update test (lock.test.mjs): N sections, each an
// updateJson with fence: true that counts and appends its token to LOG, in
// the section, so the log's order is the sections' order.
//   node updater.cjs DIST FILE LOG N
const fs = require("node:fs");
const path = require("node:path");
const [dist, file, log, n] = process.argv.slice(2);
const lib = require(path.join(dist, "index.js"));
(async () => {
  for (let i = 0; i < Number(n); i += 1) {
    await lib.updateJson(
      file,
      (state = { count: 0 }, lock) => {
        fs.appendFileSync(log, `${lock.fence}\n`);
        return { count: state.count + 1 };
      },
      { fence: true, retries: 1e6, retryDelayMs: 20 },
    );
  }
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
