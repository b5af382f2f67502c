// What a consumer writes: hold the lock for a scope; give up quickly when someone else holds it.
import { acquireLock, FileLockAcquireError } from "exactlock";
import { writeFile } from "node:fs/promises";

export async function save(file: string, text: string): Promise<"saved" | "busy"> {
  try {
    await using _lock = await acquireLock(file, { retries: 0 });
    await writeFile(file, text);
    return "saved";
  } catch (error) {
    if (error instanceof FileLockAcquireError) {
      const code: "ELOCKED" = error.code;
      return code === "ELOCKED" ? "busy" : "saved";
    }
    throw error;
  }
}
