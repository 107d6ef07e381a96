import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { DEFAULTS, SECRET_VARS, TEXT_VARS, type LimitName } from "../../common/settings";
import { CLOSE_CODES } from "../../protocol/close-codes";
import { pusherCloseAction, PusherCloseCode } from "../../protocol/pusher";

/**
 * The tables a reader decides by, held to the code they describe: the close
 * codes and whether each means "reconnect" (protocol/close-codes.ts), every
 * limit and its default (common/settings.ts), and the vars wrangler.toml sets.
 */

const repo = fileURLToPath(new URL("../../", import.meta.url));
const read = (path: string) => readFileSync(`${repo}${path}`, "utf8");
const run = promisify(execFile);

/** Vars and secrets the service reads that are not limits (common/settings.ts). */
const TEXT_SETTINGS: readonly string[] = TEXT_VARS;
const SECRETS: readonly string[] = SECRET_VARS;

/** The rows of the first table under `heading` (a whole heading line), as cells keyed by the header's column names. */
function tableUnder(markdown: string, heading: string): Record<string, string>[] {
  const lines = markdown.split("\n");
  const start = lines.findIndex((line) => line.trim() === heading);
  if (start < 0) throw new Error(`no heading ${JSON.stringify(heading)}`);
  const level = heading.match(/^#+/)![0].length;
  const rows: string[][] = [];
  for (const line of lines.slice(start + 1)) {
    const nextHeading = line.match(/^(#+) /);
    if (nextHeading && nextHeading[1]!.length <= level) break;
    if (line.startsWith("|")) rows.push(splitRow(line));
    else if (rows.length > 0) break;
  }
  if (rows.length < 2) throw new Error(`no table under ${heading}`);
  const [header, separator, ...body] = rows;
  if (!separator!.every((cell) => /^:?-+:?$/.test(cell))) throw new Error(`the table under ${heading} has no separator row`);
  return body.map((cells) => Object.fromEntries(header!.map((name, i) => [name, cells[i] ?? ""])));
}

/** The cells of one table row, split on pipes outside code spans. */
function splitRow(line: string): string[] {
  const cells: string[] = [];
  let cell = "";
  let inCode = false;
  for (const char of line.trim().slice(1)) {
    if (char === "`") inCode = !inCode;
    if (char === "|" && !inCode) {
      cells.push(cell.trim());
      cell = "";
    } else cell += char;
  }
  return cells;
}

/** The names in a cell written as `A` or `A` / `B`. */
function varNames(cell: string): string[] {
  return [...cell.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1]!);
}

/**
 * A default as the docs write it, in the var's own unit: "65536", "32,000", "64 KiB", "1 MiB",
 * "10 s" (of a _MS var: 10000), "120" (of a _SECONDS var). NaN when the text is not a plain quantity.
 */
function parseDefault(name: string, text: string): number {
  const m = text.trim().match(/^(\d[\d,]*(?:\.\d+)?)\s*(KiB|MiB|ms|s)?$/);
  if (!m) return Number.NaN;
  const value = Number(m[1]!.replaceAll(",", ""));
  const unit = m[2];
  if (unit === undefined) return value;
  if (unit === "KiB" || unit === "MiB") return name.endsWith("_BYTES") ? value * (unit === "KiB" ? 1024 : 1024 * 1024) : Number.NaN;
  if (name.endsWith("_MS")) return unit === "s" ? value * 1000 : value;
  if (name.endsWith("_SECONDS")) return unit === "s" ? value : value / 1000;
  return Number.NaN;
}

/** Every (var, default) pair a table lists, with vars and defaults paired across "A / B" cells. */
function documentedDefaults(rows: Record<string, string>[], varColumn: string, defaultColumn: string): [string, number, string][] {
  return rows.flatMap((row) => {
    const names = varNames(row[varColumn]!);
    const values = row[defaultColumn]!.split(" / ");
    if (names.length === 0) throw new Error(`a row names no var: ${JSON.stringify(row)}`);
    if (values.length !== names.length) throw new Error(`${names.join(", ")}: ${values.length} defaults for ${names.length} vars`);
    return names.map((name, i): [string, number, string] => [name, parseDefault(name, values[i]!), values[i]!.trim()]);
  });
}

/** Holds a documented limits table to DEFAULTS; returns what is wrong, one line each. */
function limitsMismatches(documented: [string, number, string][], { everyLimit }: { everyLimit: boolean }): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [name, value, text] of documented) {
    if (seen.has(name)) problems.push(`${name} is listed twice`);
    seen.add(name);
    if (!(name in DEFAULTS)) problems.push(`${name} is not a setting (common/settings.ts DEFAULTS)`);
    else if (value !== DEFAULTS[name as LimitName]) problems.push(`${name}: documented default ${JSON.stringify(text)}, DEFAULTS has ${DEFAULTS[name as LimitName]}`);
  }
  if (everyLimit) for (const name of Object.keys(DEFAULTS)) if (!seen.has(name)) problems.push(`${name} is not documented`);
  return problems;
}

describe("parsing the tables", () => {
  it("reads defaults in the units the docs write them", () => {
    expect(parseDefault("WINDOW_BYTES", "1 MiB")).toBe(1048576);
    expect(parseDefault("MAX_MESSAGE_BYTES", "64 KiB")).toBe(65536);
    expect(parseDefault("SLOW_GRACE_MS", "10 s")).toBe(10000);
    expect(parseDefault("FLUSH_DELAY_MS", "0")).toBe(0);
    expect(parseDefault("IDLE_TIMEOUT_SECONDS", "90")).toBe(90);
    expect(parseDefault("MAX_SOCKETS_PER_ROOM", "32,000")).toBe(32000);
    expect(parseDefault("WINDOW_BYTES", "1 s")).toBeNaN();
    expect(parseDefault("SLOW_GRACE_MS", "1 MiB")).toBeNaN();
    expect(parseDefault("CLIENT_FRAMES_PER_SECOND", "20 (burst 60)")).toBeNaN();
  });

  it("finds a table under its heading, with pipes inside code spans kept in their cell", () => {
    const doc = "# Doc\n\n## Other\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Here\n\ntext\n\n| var | default |\n|---|---|\n| `A` | `x | y` |\n| `B` | 3 |\n\n## Next\n";
    expect(tableUnder(doc, "## Here")).toEqual([
      { var: "`A`", default: "`x | y`" },
      { var: "`B`", default: "3" },
    ]);
    expect(() => tableUnder(doc, "## Missing")).toThrow(/no heading/);
  });

  it("reports a duplicated, a wrong, an unknown and a missing limit", () => {
    const problems = limitsMismatches(
      [
        ["WINDOW_BYTES", 1048576, "1 MiB"],
        ["WINDOW_BYTES", 1048576, "1 MiB"],
        ["SLOW_GRACE_MS", 5000, "5 s"],
        ["SLOW_DROPS_BEFORE_CLOSE", 64, "64"],
      ],
      { everyLimit: true },
    );
    expect(problems).toContain("WINDOW_BYTES is listed twice");
    expect(problems).toContain('SLOW_GRACE_MS: documented default "5 s", DEFAULTS has 10000');
    expect(problems).toContain("SLOW_DROPS_BEFORE_CLOSE is not a setting (common/settings.ts DEFAULTS)");
    expect(problems).toContain("HISTORY_MAX_MESSAGES is not documented");
  });
});

describe("docs/protocol.md", () => {
  const doc = read("docs/protocol.md");

  it("lists every close code with the reconnect decision of CLOSE_CODES", () => {
    const rows = tableUnder(doc, "## Close codes");
    const documented = Object.fromEntries(rows.map((row) => [Number(row.code), { name: row.name, reconnect: row.reconnect }]));
    const expected = Object.fromEntries(
      Object.entries(CLOSE_CODES).map(([code, info]) => [Number(code), { name: info.name, reconnect: info.reconnect ? "yes" : "no" }]),
    );
    expect(documented).toEqual(expected);
    expect(rows).toHaveLength(Object.keys(CLOSE_CODES).length);
  });

  it("stops its raw client on exactly the close codes that mean stop", () => {
    const stop = doc.match(/const STOP = new Set\(\[([\d, ]*)\]\)/);
    expect(stop, "the raw client's STOP set").not.toBeNull();
    const codes = stop![1]!.split(",").map((c) => Number(c.trim())).sort((a, b) => a - b);
    const expected = Object.entries(CLOSE_CODES).filter(([, info]) => !info.reconnect).map(([code]) => Number(code));
    expect(codes).toEqual(expected);
  });

  it("lists every limit with its default, and nothing that is not a limit", () => {
    const documented = documentedDefaults(tableUnder(doc, "## Limits"), "var", "default");
    expect(limitsMismatches(documented, { everyLimit: true })).toEqual([]);
  });
});

describe("docs/pusher.md", () => {
  const doc = read("docs/pusher.md");

  it("lists every close code of the front door, with what a Pusher client does after it", () => {
    const rows = tableUnder(doc, "## Close codes");
    const words = { stop: "stops", backoff: "backs off, reconnects", reconnect: "reconnects now" } as const;
    const documented = Object.fromEntries(rows.map((row) => [Number(row.code), row["the client"]]));
    const expected = Object.fromEntries(Object.values(PusherCloseCode).map((code) => [code, words[pusherCloseAction(code) as keyof typeof words]]));
    expect(documented).toEqual(expected);
  });

  it("lists every Pusher var the service reads", () => {
    const documented = tableUnder(doc, "## Turn it on").flatMap((row) => varNames(row.var ?? ""));
    expect(documented.sort()).toEqual([...TEXT_SETTINGS, ...SECRETS].filter((name) => name.startsWith("PUSHER_")).sort());
  });
});

describe("the configuration tables of docs/configuration.md and the guides", () => {
  const tables: [path: string, heading: string][] = [
    ["docs/configuration.md", "## The vars most deployments touch"],
    ["docs/coordinator.md", "## Configuration"],
    ["docs/sharded-rooms.md", "## Configuration"],
    ["docs/webhooks.md", "## Configuration"],
    ["docs/multiplexing.md", "## Configuration"],
  ];
  for (const [path, heading] of tables) {
    it(`${path}: every var is a setting with the default the service has, each listed once`, () => {
      const documented = documentedDefaults(tableUnder(read(path), heading), "var", "default");
      expect(documented.length).toBeGreaterThan(0);
      expect(limitsMismatches(documented, { everyLimit: false })).toEqual([]);
    });
  }

  it("docs/configuration.md: lists every setting that is not a limit once, secrets as secrets", () => {
    const rows = tableUnder(read("docs/configuration.md"), "## Settings that are not limits");
    const documented = rows.flatMap((row) => varNames(row.setting ?? "").map((name) => `${name} ${row.kind}`));
    const expected = [...TEXT_SETTINGS.map((name) => `${name} var`), ...SECRETS.map((name) => `${name} secret`)];
    expect(documented.sort()).toEqual(expected.sort());
  });
});

describe("wrangler.toml", () => {
  it("sets every limit as a var (the local server takes only those from .dev.vars and the environment), and nothing else", async () => {
    // The vars as wrangler reads them, through the local server's own reader.
    const { stdout } = await run(process.execPath, [`${repo}local-server/read-config.mjs`, `${repo}wrangler.toml`], { timeout: 60_000 });
    const vars = Object.keys((JSON.parse(stdout) as { vars: Record<string, unknown> }).vars).sort();
    const known = new Set([...Object.keys(DEFAULTS), ...TEXT_SETTINGS]);
    expect({
      unknown: vars.filter((name) => !known.has(name)),
      secrets: vars.filter((name) => SECRETS.includes(name)), // `wrangler secret put`, never a var
      missing: Object.keys(DEFAULTS).filter((name) => !vars.includes(name)),
    }).toEqual({ unknown: [], secrets: [], missing: [] });
  });
});

describe("docs/deploy.md", () => {
  it("lists every Durable Object binding of wrangler.toml with its class and the migration that creates it", async () => {
    const { stdout } = await run(process.execPath, [`${repo}local-server/read-config.mjs`, `${repo}wrangler.toml`], { timeout: 60_000 });
    const config = JSON.parse(stdout) as { durable_objects: { bindings: { name: string; class_name: string }[] }; migrations: { tag: string; new_sqlite_classes?: string[] }[] };
    const createdBy = new Map(config.migrations.flatMap((m) => (m.new_sqlite_classes ?? []).map((name) => [name, m.tag] as const)));
    const expected = config.durable_objects.bindings.map((b) => ({ binding: b.name, class: b.class_name, migration: createdBy.get(b.class_name) ?? "none" }));
    const rows = tableUnder(read("docs/deploy.md"), "## What a deploy creates").map((row) => ({
      binding: row.binding!.replaceAll("`", ""),
      class: row.class!.replaceAll("`", ""),
      migration: row.migration!.replaceAll("`", ""),
    }));
    expect(rows).toEqual(expected);
    const counts = read("docs/deploy.md").match(/- (\w+) Durable Object namespaces, one per binding, each class created by one of the (\w+)/);
    const words = ["zero", "one", "two", "three", "four", "five", "six"];
    expect([counts?.[1]?.toLowerCase(), counts?.[2]]).toEqual([words[expected.length], words[config.migrations.length]]);
  });
});

describe("secrets in the docs' commands", () => {
  it("never pass a secret with --var (npm prints the command line, ps shows it)", () => {
    const pattern = new RegExp(`--var[ =](${SECRETS.join("|")})=`, "g");
    const files = ["README.md", ...readdirSync(`${repo}docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`), "examples/webhook-receiver/receiver.mjs", "client-sdk/README.md", "load/README.md"];
    const found = files.flatMap((file) => [...read(file).matchAll(pattern)].map((m) => `${file}: ${m[0]}`));
    // security.md quotes npm's banner to show why not.
    expect(found).toEqual(["docs/security.md: --var PUBLISH_KEY="]);
  });
});

describe("npm pack", () => {
  it("writes tarballs git ignores, where the READMEs say it does: a pack leaves the checkout clean", async () => {
    const tarballs = [
      ...[...read("docs/library.md").matchAll(/`npm pack` builds `([\w.-]+\.tgz)`/g)].map((m) => m[1]!),
      ...[...read("client-sdk/README.md").matchAll(/cd client-sdk && npm pack\s+# writes ([\w.-]+\.tgz)/g)].map((m) => `client-sdk/${m[1]!}`),
    ];
    expect(tarballs).toEqual(["edge-fanout-0.1.0.tgz", "client-sdk/edge-fanout-client-0.1.0.tgz"]);
    const { stdout } = await run("git", ["check-ignore", "--no-index", ...tarballs], { cwd: repo }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? "" }));
    expect(stdout.trim().split("\n")).toEqual(tarballs);
  });
});

describe("paths the docs name", () => {
  // Paths that start at one of the repository's folders ("common/settings.ts", "local-server/"),
  // anywhere in the text; generated output (dist/, load/results/) is not in a checkout.
  const folders = readdirSync(repo).filter((name) => !name.startsWith(".") && !["node_modules", "dist"].includes(name) && statSync(`${repo}${name}`).isDirectory());
  const pathPattern = new RegExp(`(?<![\\w./<>-])((?:${folders.join("|")})/[\\w./-]*)`, "g");
  const generated = ["load/results/", "load/dist"];

  for (const doc of ["README.md", "docs/protocol.md", "docs/history.md", "docs/deploy.md", "docs/hooks.md", "docs/coordinator.md", "docs/sharded-rooms.md", "docs/webhooks.md", "docs/guarantees.md", "docs/architecture.md", "docs/multiplexing.md", "docs/configuration.md", "docs/library.md", "docs/local-server.md", "docs/testing.md", "wrangler.toml"]) {
    it(`${doc}: every path it names exists`, () => {
      const missing = read(doc)
        .split("\n")
        .flatMap((line, i) => [...line.matchAll(pathPattern)].map((m) => [i + 1, m[1]!.replace(/[.,:;]+$/, "")] as const))
        .filter(([, path]) => !generated.some((prefix) => path.startsWith(prefix)) && !existsSync(`${repo}${path}`))
        .map(([line, path]) => `${doc}:${line} ${path}`);
      expect(missing).toEqual([]);
    });
  }
});

describe("links between the docs", () => {
  /** A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens. */
  const slug = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, "")
      .replaceAll(" ", "-");

  /** The text outside fenced code blocks. */
  const prose = (markdown: string) => markdown.replace(/^(```|~~~).*\n[\s\S]*?^\1\s*$/gm, "");

  /** The anchors of a page's headings, with GitHub's -1, -2 for repeats. */
  function anchors(markdown: string): Set<string> {
    const seen = new Map<string, number>();
    const found = new Set<string>();
    for (const [, heading] of prose(markdown).matchAll(/^#{1,6} (.+)$/gm)) {
      const base = slug(heading!);
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      found.add(count === 0 ? base : `${base}-${count}`);
    }
    return found;
  }

  it("reads anchors as GitHub writes them, outside code blocks", () => {
    expect([...anchors("# Doc\n\n## `GET /rooms?prefix=`\n\n```sh\n# not a heading\n```\n\n## A, B: c\n\n## A, B: c\n")]).toEqual([
      "doc",
      "get-roomsprefix",
      "a-b-c",
      "a-b-c-1",
    ]);
  });

  const pages = ["README.md", "client-sdk/README.md", "load/README.md", ...readdirSync(`${repo}docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
  for (const page of pages) {
    it(`${page}: every relative link reaches a file, and every #anchor a heading of its page`, () => {
      const dir = page.includes("/") ? page.slice(0, page.lastIndexOf("/") + 1) : "";
      const broken = [...prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!)
        .filter((link) => !/^[a-z][a-z+.-]*:/i.test(link))
        .filter((link) => {
          const [target, anchor] = link.split("#") as [string, string | undefined];
          const path = target === "" ? page : new URL(target, `file:///${dir}`).pathname.slice(1);
          if (!existsSync(`${repo}${path}`)) return true;
          return anchor !== undefined && path.endsWith(".md") && !anchors(read(path)).has(anchor);
        });
      expect(broken).toEqual([]);
    });
  }
});

describe("README.md", () => {
  it("links every page of docs/", () => {
    const linked = new Set([...read("README.md").matchAll(/\]\((docs\/[\w.-]+\.md)[)#]/g)].map((m) => m[1]!));
    const pages = readdirSync(`${repo}docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`);
    expect(pages.filter((page) => !linked.has(page))).toEqual([]);
  });
});
