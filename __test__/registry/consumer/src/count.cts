// CommonJS worker: the same counter, through require().
import exactlock = require("exactlock");
import fs = require("node:fs");

async function main(file: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    await exactlock.withFileLock(file, () => {
      const value = Number(fs.readFileSync(file, "utf8"));
      fs.writeFileSync(file, String(value + 1));
    });
  }
}

const [file, times] = process.argv.slice(2);
if (file === undefined || times === undefined) throw new Error("usage: count.cjs FILE TIMES");
main(file, Number(times)).catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
