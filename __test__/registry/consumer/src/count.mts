// ESM worker: adds 1 to the number in a file, `times` times, each under the lock.
import { withFileLock } from "exactlock";
import { readFile, writeFile } from "node:fs/promises";

const [file, times] = process.argv.slice(2);
if (file === undefined || times === undefined) throw new Error("usage: count.mjs FILE TIMES");
for (let i = 0; i < Number(times); i++) {
  await withFileLock(file, async () => {
    const value = Number(await readFile(file, "utf8"));
    await writeFile(file, String(value + 1));
  });
}
