import { withFileLock } from "exactlock";
import { readFile, writeFile } from "node:fs/promises";

const file = "/tmp/counter.txt"; // its lock is the directory /tmp/counter.txt.lock
const count = await withFileLock(file, async () => {
  const next = Number(await readFile(file, "utf8").catch(() => "0")) + 1;
  await writeFile(file, String(next)); // no other process can write in between
  return next;
});
console.log(count >= 1); // true
