// A CommonJS consumer (require) of exactlock's types; see consumer.mts.
import exactlock = require("exactlock");

async function main(): Promise<number> {
  try {
    return await exactlock.withFileLock("/tmp/f", () => 1, { signal: AbortSignal.timeout(100) });
  } catch (error) {
    if (error instanceof exactlock.FileLockAcquireError) return error.attempts;
    throw error;
  }
}
void main;
