/**
 * Every benchmark command the docs give (`npm run bench -- <name> ...`) names a benchmark that exists and
 * passes its options as that benchmark reads them, and every load tool command a compare runs parses as the
 * load tool reads it: a figure the docs report stays reproducible by the command printed beside it.
 */
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BENCHES } from "../bench/benches";
import { variantOf } from "../bench/compare";
import { parseOptions } from "../src/kit/args";
import { parseLoadOptions } from "../src/options";

const repo = fileURLToPath(new URL("../../", import.meta.url));
const docs = ["load/README.md", ...readdirSync(`${repo}docs`).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`), ...readdirSync(`${repo}docs/archive`).map((f) => `docs/archive/${f}`)];

/** A shell line's words, quotes taken off (enough for the commands the docs print). */
function words(line: string): string[] {
  return [...line.matchAll(/"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3] ?? "");
}

/**
 * Each `npm run bench -- ...` command of a text, continuation lines joined, comments and elided ones left out;
 * shell variables a block sets (B="npm run bench -- cursor"; OLD="--dir /work/old") stand for their values.
 */
function commands(text: string): Array<{ line: string; argv: string[] }> {
  let joined = text.replace(/\\\n\s*/g, " ");
  const variables = /\b([A-Z]+)="([^"]*)";?/g;
  for (const [, name, value] of joined.matchAll(variables)) joined = joined.replaceAll(`$${name}`, value ?? "");
  return [...joined.replace(variables, "").matchAll(/npm run bench -- ((?:"[^"]*"|[^\n`#;"])*)/g)]
    .map((m) => (m[1] ?? "").replace(/[.)]+\s*$/, "").trim())
    .filter((line) => !/[…<>[\]|]|\.\.\./.test(line) && line.length > 0)
    .map((line) => ({ line, argv: words(line) }));
}

describe("benchmark commands in the docs", () => {
  for (const doc of docs) {
    const found = commands(readFileSync(`${repo}${doc}`, "utf8"));
    if (found.length === 0) continue;
    it(`${doc}: ${found.length} command(s) name a benchmark and parse by its options`, () => {
      for (const { line, argv } of found) {
        const [name, ...rest] = argv;
        const bench = BENCHES.find((b) => b.name === name);
        expect(bench, line).toBeDefined();
        if (!bench) continue;
        const args = parseOptions(rest, bench.options, bench.positionals !== undefined);
        if (name !== "compare") continue;
        for (const variant of args.texts("variant").map(variantOf)) expect(() => parseLoadOptions([...args.positionals, ...variant.extra]), `${line}: ${variant.name}`).not.toThrow();
      }
    });
  }
});
