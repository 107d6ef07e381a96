/**
 * Command-line options for every part of the load tool, on `node:util` parseArgs:
 * unknown options are refused, and a number, a list or a choice that does not
 * fit says which option and what it takes.
 */
import { parseArgs } from "node:util";

export interface OptionSpec {
  /** A flag takes no value. */
  flag?: boolean;
  /** May be given more than once. */
  multiple?: boolean;
  short?: string;
  /** The value when the option is not given. */
  default?: string;
  /** One line for --help (a command with a usage text of its own leaves it out). */
  help?: string;
}

export type OptionSpecs = Record<string, OptionSpec>;

export interface Range {
  min?: number;
  max?: number;
  integer?: boolean;
}

/** Asked for --help: the caller prints its usage and exits 0. */
export class UsageRequested extends Error {
  constructor() {
    super("usage");
  }
}

/** The text of a number option: `fallback` when absent, else a finite number within `range`, or an error naming the option. */
export function readNumber(text: string | undefined, name: string, fallback: number, range: Range = {}): number {
  if (text === undefined) return fallback;
  const { min = -Infinity, max = Infinity, integer = false } = range;
  const n = Number(text);
  if (text.trim() === "" || !Number.isFinite(n) || n < min || n > max) {
    const bounds = Number.isFinite(min) && Number.isFinite(max) ? ` in [${min}, ${max}]` : Number.isFinite(min) ? ` of at least ${min}` : "";
    throw new Error(`--${name} must be a number${bounds}, got ${text}`);
  }
  if (integer && !Number.isInteger(n)) throw new Error(`--${name} must be an integer, got ${text}`);
  return n;
}

/** "name<separator>value" items (headers, vars) as a record, or an error naming the option. */
export function readPairs(items: readonly string[], separator: string, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of items) {
    const at = item.indexOf(separator);
    if (at <= 0) throw new Error(`--${name} takes "name${separator}value", got ${JSON.stringify(item)}`);
    out[item.slice(0, at).trim()] = item.slice(at + 1).trim();
  }
  return out;
}

/** One of `choices`, or an error naming the option and what it takes. */
export function readChoice<T extends string>(text: string | undefined, name: string, choices: readonly T[], fallback: T): T {
  if (text === undefined) return fallback;
  if (!(choices as readonly string[]).includes(text)) throw new Error(`--${name} must be ${choices.join(", ")}; got ${text}`);
  return text as T;
}

type Value = string | boolean | string[] | boolean[] | undefined;

/** Parsed options, read by name with their types checked on the way out. */
export class Options<K extends string> {
  constructor(
    private readonly values: Record<string, Value>,
    readonly positionals: string[],
    /** The command line as given, for a result to say how it was made. */
    readonly argv: readonly string[] = [],
  ) {}

  /** The same options with `defaults` for those not given (defaults that depend on a positional, such as a scenario's). */
  withDefaults(defaults: Partial<Record<K, string>>): Options<K> {
    const values = { ...this.values };
    for (const [name, value] of Object.entries(defaults)) values[name] ??= value as string;
    return new Options(values, this.positionals, this.argv);
  }

  has(name: K): boolean {
    return this.values[name] !== undefined;
  }

  flag(name: K): boolean {
    return this.values[name] === true;
  }

  /** A text option's value (its default when not given); undefined when it has neither. */
  text(name: K): string | undefined {
    const value = this.values[name];
    return typeof value === "string" ? value : undefined;
  }

  /** Every value of an option that may repeat. */
  texts(name: K): string[] {
    const value = this.values[name];
    return Array.isArray(value) ? value.map(String) : typeof value === "string" ? [value] : [];
  }

  number(name: K, range: Range = {}): number {
    const text = this.text(name);
    if (text === undefined) throw new Error(`--${name} is required`);
    return readNumber(text, name, 0, range);
  }

  int(name: K, range: Omit<Range, "integer"> = { min: 0 }): number {
    return this.number(name, { ...range, integer: true });
  }

  /** A comma-separated list ("ours,bare"). */
  list(name: K): string[] {
    return (this.text(name) ?? "").split(",").map((item) => item.trim()).filter(Boolean);
  }

  /** A comma-separated list of numbers ("1,100"). */
  numbers(name: K, range: Range = {}): number[] {
    return this.list(name).map((item) => readNumber(item, name, 0, range));
  }

  choice<T extends string>(name: K, choices: readonly T[]): T {
    const text = this.text(name);
    if (text === undefined) throw new Error(`--${name} is required (${choices.join(", ")})`);
    return readChoice(text, name, choices, text as T);
  }
}

/** The values parsed for `specs`: a flag's boolean, a repeated option's list, anyone else's text (absent when not given). */
export type Values<S extends OptionSpecs> = { [K in keyof S]?: S[K]["flag"] extends true ? boolean : S[K]["multiple"] extends true ? string[] : string };

/** Parses `argv` by `specs` (with --help, -h); refuses unknown options, and positionals unless allowed. */
export function parseValues<const S extends OptionSpecs>(argv: readonly string[], specs: S, positionals = false): { values: Values<S> & { help?: boolean }; positionals: string[] } {
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean; short?: string; default?: string }> = {
    help: { type: "boolean", short: "h" },
  };
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = {
      type: spec.flag ? "boolean" : "string",
      ...(spec.multiple ? { multiple: true } : {}),
      ...(spec.short ? { short: spec.short } : {}),
      ...(spec.default !== undefined ? { default: spec.default } : {}),
    };
  }
  const parsed = parseArgs({ args: [...argv], options, allowPositionals: positionals, strict: true });
  return { values: parsed.values as Values<S> & { help?: boolean }, positionals: parsed.positionals };
}

/** Parses `argv` by `specs` into options read by name; throws UsageRequested for --help and a clear error for anything unknown. */
export function parseOptions<const S extends OptionSpecs>(argv: readonly string[], specs: S, positionals = false): Options<Extract<keyof S, string>> {
  const parsed = parseValues(argv, specs, positionals);
  if (parsed.values.help === true) throw new UsageRequested();
  return new Options(parsed.values as Record<string, Value>, parsed.positionals, argv);
}

/** The option lines of a usage text, from the same specs the parser reads. */
export function optionsUsage(specs: OptionSpecs): string {
  const rows = Object.entries(specs).map(([name, spec]) => [`--${name}${spec.flag ? "" : " V"}`, `${spec.help ?? ""}${spec.default !== undefined && spec.default !== "" ? ` (default ${spec.default})` : ""}`] as const);
  const width = Math.max(0, ...rows.map(([left]) => left.length));
  return rows.map(([left, right]) => `  ${left.padEnd(width)}  ${right}`).join("\n");
}
