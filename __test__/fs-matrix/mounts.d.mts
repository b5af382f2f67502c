// Types of mounts.mjs (plain ESM, shared with node scripts and the bench).
export type FsKind = "ext4" | "tmpfs" | "xfs" | "btrfs" | "overlayfs" | "sshfs";
export const FILESYSTEMS: FsKind[];
export const MAGIC: Record<FsKind, number>;
export const TOOLS: Record<FsKind, string[]>;
export const SSHFS_OPTIONS: string[];
export interface Sshd {
  port: number;
  identity: string;
  pid: number;
  stop(): Promise<void>;
}
export interface Mount {
  kind: FsKind;
  /** The (empty, realpath'd) directory to lock files in. */
  dir: string;
  fsType: number;
  unmount(): Promise<void>;
  /** overlayfs: the lower and upper layers; `remount()` after writing to the lower one. */
  lowerDir?: string;
  upperDir?: string;
  remount?(): void;
  /** sshfs: the local directory the mount shows, and the daemon serving it. */
  exportDir?: string;
  sshd?: Sshd;
  image?: string;
}
export function whyNotMountable(kind: FsKind): string | undefined;
export function baseDir(): string;
export function isMountPoint(dir: string): boolean;
export function fsTypeOf(dir: string): number;
export function mountFs(kind: FsKind): Promise<Mount>;
export function startSshd(): Promise<Sshd>;
export function mountSshfs(exportDir: string, server?: Sshd, extraOptions?: string[]): Promise<{ dir: string; fsType: number; unmount(): Promise<void> }>;
export function mountAll(kinds?: FsKind[]): Promise<{ mounts: Partial<Record<FsKind, Mount>>; skipped: Partial<Record<FsKind, string>> }>;
export function unmountAll(): Promise<void>;
