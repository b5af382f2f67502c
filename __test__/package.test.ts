import { describe, expect, it } from "vitest";
import { nativeVersion } from "../lib/index.ts";

describe("package", () => {
  it("loads the native core", () => {
    expect(nativeVersion()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
