/**
 * The capacity command as a user runs it (load/build.mjs, then the bundled
 * CLI): one question, one answer.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));

function capacity(...args: string[]): string {
  return execFileSync(process.execPath, ["load/dist/capacity.js", ...args], { cwd: root, encoding: "utf8" });
}

beforeAll(() => {
  execFileSync(process.execPath, ["load/build.mjs"], { cwd: root, stdio: "inherit" });
}, 60_000);

describe("npm run capacity", () => {
  it("answers a sharded room with that room's bill alone (the README's sharded example)", () => {
    const text = capacity("--room-size", "1000000", "--room-rate", "10", "--shard-sockets", "3000");
    expect(text).toMatch(/^Sharded room on Cloudflare: 1,000,000 subscribers, 10 msg\/s/);
    // One monthly total, the sharded room's; nothing of the many-rooms model of 10,000 default connections.
    expect(text.match(/\$[\d,.]+\/month/g)).toHaveLength(1);
    expect(text).not.toMatch(/DOES NOT FIT|Self-hosted workerd|Monthly cost on Cloudflare|10,000 connections/);
  });

  it("gives the same single answer in JSON", () => {
    const json = JSON.parse(capacity("--room-size", "1000000", "--room-rate", "10", "--shard-sockets", "3000", "--json")) as Record<string, unknown>;
    expect(Object.keys(json).sort()).toEqual(["shardCosts", "shardSources", "sharded"]);
    expect((json.sharded as { shape: { subscribers: number } }).shape.subscribers).toBe(1_000_000);
  });

  it("answers multiplexed connections in four designs, beside the single-room equivalent (2,000,000 sockets)", () => {
    const text = capacity("--connections", "100000", "--rooms-per-connection", "20", "--room-size", "50", "--room-rate", "2", "--publish-via", "http");
    expect(text).toMatch(/^Multiplexed connections on Cloudflare: 100,000 connections × 20 rooms each = 2,000,000 subscriptions, in 40,000 rooms of 50 followers/);
    expect(text).toMatch(/client sockets\s+100,000\s+100,000\s+100,000\s+2,000,000/);
    expect(text).toContain("Ably Pub/Sub");
    expect(text).not.toMatch(/Monthly cost on Cloudflare|Sharded room on Cloudflare/);
    const json = JSON.parse(capacity("--connections", "100000", "--rooms-per-connection", "20", "--room-size", "50", "--room-rate", "2", "--json")) as {
      multiplexed: { rooms: number; designs: Array<{ design: string; clientSockets: number }> };
    };
    expect(json.multiplexed.rooms).toBe(40_000);
    expect(json.multiplexed.designs.map((d) => d.design)).toEqual(["hubs", "object per connection", "Worker-held socket", "single-room sockets"]);
  });

  it("leads with the verdict in a few short lines, and gives everything behind it with --details", () => {
    const text = capacity("--connections", "10000", "--room-size", "100");
    const lines = text.trimEnd().split("\n");
    expect(lines.length).toBeLessThanOrEqual(8);
    for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(110);
    expect(lines[0]).toBe("10,000 connections in 100 rooms of 100, 0.1 msg/s each: 100,000 deliveries/s");
    expect(text).toMatch(/^Cloudflare: fits; most used: .+, [\d.]+% \(it allows up to [\d,]+ sockets per room\)$/m);
    expect(text).toMatch(/^ {2}\$[\d,.]+\/month, \$[\d.]+ per million delivered; largest item: SQLite rows written/m);
    expect(text).toMatch(/^Self-hosted on this machine: (fits|does NOT fit)/m);
    expect(text).toMatch(/^Fixed-price servers \(\$6\/month each\): \d+, \$[\d,.]+\/month with transfer/m);
    expect(text.trimEnd()).toMatch(/add --details$/);
    expect(text).not.toContain("Monthly cost on Cloudflare");
    const details = capacity("--connections", "10000", "--room-size", "100", "--details");
    expect(details.startsWith(lines.slice(0, 5).join("\n"))).toBe(true);
    expect(details).toContain("Monthly cost on Cloudflare");
    expect(details).toContain("Cloudflare prices used:");
  });

  it("still answers the many-rooms question when no sharded room is asked about", () => {
    const text = capacity("--connections", "10000", "--room-size", "100", "--details");
    expect(text).toContain("Monthly cost on Cloudflare");
    expect(text).not.toContain("Sharded room on Cloudflare");
  });
});
