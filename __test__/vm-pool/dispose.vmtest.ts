/**
 * Run by __test__/vm-pool.test.ts in vitest's vmThreads pool, where the
 * realm of a test may lack Symbol.asyncDispose: `await using` must still
 * release the lock at the end of its block.
 */
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { expect, it } from "vitest";
import { acquireLock } from "../../lib/index.ts";

it("await using releases the lock at the end of the block in a vm realm", async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "exactlock-vm-"));
  const file = path.join(root, "state.json");
  try {
    {
      await using release = await acquireLock(file);
      expect(typeof release).toBe("function");
      expect(fs.existsSync(`${file}.lock`)).toBe(true);
    }
    expect(fs.existsSync(`${file}.lock`)).toBe(false);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});
