import { describe, expect, it } from "bun:test";
import { nativeVersion } from "../lib/index.ts";

describe("package under bun", () => {
  it("loads the native core", () => {
    expect(nativeVersion()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
