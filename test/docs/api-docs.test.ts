import { existsSync, readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import ts from "typescript";
import { beforeAll, describe, expect, it } from "vitest";

/**
 * The public API's JSDoc, held to the code: what `edge-fanout` (worker/lib.ts)
 * and `@edge-fanout/client` (client-sdk/src/index.ts, react.ts, history.ts)
 * export.
 *
 * - Every exported name has a description; every exported class and
 *   function an `@example` and a `@see`; every function `@param` for each
 *   parameter and `@returns`; so do the SDK classes' methods and the
 *   members a `Room` subclass overrides or calls (its hooks also get an
 *   `@example` and a `@see`). Every member of an exported interface or
 *   class has a description.
 * - Every `@default`, and every `[name=value]` of a `@param`, is the value
 *   the code falls back to: a parameter's initializer, or a `name ?? value`
 *   (a destructuring default, `name !== false`) somewhere in the package's
 *   sources; defaults applied elsewhere are named in APPLIED_ELSEWHERE.
 * - Every `@example` type-checks, in a module of its own, against the
 *   declarations the package's build emits (emitted here in memory, as
 *   tools/build-library.mjs and client-sdk/build.mjs emit them), with the
 *   package's exports imported and the few stand-ins of PLACEHOLDERS
 *   declared. Those declarations carry the same JSDoc as the sources.
 * - Every `@see` names a file of the repository and, after `#`, one of its
 *   headings.
 */

const repo = fileURLToPath(new URL("../../", import.meta.url));
/** Where the emitted declarations and the examples live, in memory only. */
const virtualRoot = `${repo}.api-docs/`;

interface Package {
  name: "library" | "sdk";
  /** Entry points: the specifier an application imports, and the source file. */
  entries: { specifier: string; file: string }[];
  /** How the package's sources are compiled (what its build uses). */
  options: ts.CompilerOptions;
  /** How an application that uses it compiles (the examples). */
  appOptions: ts.CompilerOptions;
}

const common: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ES2022,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  strict: true,
  skipLibCheck: true,
};

const LIBRARY: Package = {
  name: "library",
  entries: [{ specifier: "edge-fanout", file: "worker/lib.ts" }],
  options: { ...common, lib: ["lib.es2022.d.ts"], types: ["@cloudflare/workers-types"], noUncheckedIndexedAccess: true },
  appOptions: { ...common, lib: ["lib.es2022.d.ts"], types: ["@cloudflare/workers-types"] },
};

const SDK: Package = {
  name: "sdk",
  entries: [
    { specifier: "@edge-fanout/client", file: "client-sdk/src/index.ts" },
    { specifier: "@edge-fanout/client/react", file: "client-sdk/src/react.ts" },
    { specifier: "@edge-fanout/client/history", file: "client-sdk/src/history.ts" },
  ],
  options: { ...common, lib: ["lib.es2022.d.ts", "lib.dom.d.ts"], types: [], stripInternal: true },
  appOptions: { ...common, lib: ["lib.es2022.d.ts", "lib.dom.d.ts", "lib.dom.iterable.d.ts"], types: [] },
};

/**
 * Names the examples use without defining them, as hono's examples use `app`:
 * a token function, a room, a client, a secret... Declared globally, so an
 * example that defines one of them shadows it.
 */
const PLACEHOLDERS: Record<Package["name"], string> = {
  library: `
declare const secret: string;
declare const token: string;
`,
  sdk: `
type Chat = { text: string };
declare const getToken: () => Promise<string>;
declare const room: import("@edge-fanout/client").RoomClient<Chat>;
declare const client: import("@edge-fanout/client").FanoutClient;
declare const lobby: import("@edge-fanout/client").RoomSubscription<Chat>;
declare const fanoutUrl: string;
declare const publishKey: string;
declare const epoch: string;
declare const attempt: number;
declare function render(...values: unknown[]): void;
declare function reconnect(): void;
declare function showSignIn(): void;
declare function showNoAccess(): void;
declare function askUserToRetry(): void;
declare function slowDown(): void;
declare function reloadNews(): void;
declare function reloadFromServer(from: number, to: number): void;
declare function startOver(): void;
declare function store(messages: unknown[]): void;
`,
};

/**
 * Defaults the code applies without a `name ?? value` beside the option's
 * name: the option's owner and name, and the expression (over the sources'
 * top-level constants) of the value the code uses.
 */
const APPLIED_ELSEWHERE: Record<string, string> = {
  // `{ ...DEFAULT_BACKOFF, ...options.backoff }` (client.ts, fanout-client.ts).
  "RoomClientOptions.backoff": "DEFAULT_BACKOFF",
  "FanoutClientOptions.backoff": "DEFAULT_BACKOFF",
  "BackoffOptions.initialDelayMs": "DEFAULT_BACKOFF.initialDelayMs",
  "BackoffOptions.maxDelayMs": "DEFAULT_BACKOFF.maxDelayMs",
  "BackoffOptions.factor": "DEFAULT_BACKOFF.factor",
  // The service's, when the query has no `limit` (worker/history-query.ts).
  "HistoryOptions.limit": "HISTORY_PAGE_DEFAULT",
};

// ---------------------------------------------------------------------------
// JSDoc, as written

interface Tag {
  name: string;
  text: string;
}

interface Doc {
  raw: string;
  description: string;
  tags: Tag[];
}

/** A JSDoc comment's description and tags; lines inside a code fence never start a tag. */
function parseDoc(raw: string): Doc {
  const body = raw.replace(/^\/\*\*/, "").replace(/\*\/$/, "");
  const lines = body.split("\n").map((line) => line.replace(/^\s*\* ?/, ""));
  const description: string[] = [];
  const tags: Tag[] = [];
  let fenced = false;
  for (const line of lines) {
    const tag = fenced ? null : /^\s*@(\w+)\s?(.*)$/.exec(line);
    if (line.trim().startsWith("```")) fenced = !fenced;
    if (tag) tags.push({ name: tag[1]!, text: tag[2]! });
    else if (tags.length > 0) tags.at(-1)!.text += `\n${line}`;
    else description.push(line);
  }
  return { raw, description: description.join("\n").trim(), tags: tags.map((t) => ({ name: t.name, text: t.text.trim() })) };
}

/** The JSDoc written just before a declaration (a variable's sits before its statement). */
function docOf(node: ts.Node): Doc | undefined {
  const target = ts.isVariableDeclaration(node) ? node.parent.parent : node;
  const text = target.getSourceFile().text;
  const ranges = ts.getLeadingCommentRanges(text, target.getFullStart()) ?? [];
  const last = ranges.filter((range) => text.startsWith("/**", range.pos)).at(-1);
  return last ? parseDoc(text.slice(last.pos, last.end)) : undefined;
}

/** A `@param` tag: `name`, or `[name]`, or `[name=value]`, then its words. */
function parseParamTag(text: string): { name: string; bracketed: boolean; value: string | undefined } {
  const bracketed = /^\[([^\]=]+)(?:=(.*?))?\]/.exec(text);
  if (bracketed) return { name: bracketed[1]!.trim(), bracketed: true, value: bracketed[2]?.trim() };
  return { name: /^[\w$.]+/.exec(text)?.[0] ?? "", bracketed: false, value: undefined };
}

/** The code of an `@example`: what its fences hold, or all of it without fences. */
function exampleCode(text: string): string {
  const fenced = [...text.matchAll(/```\w*\n([\s\S]*?)```/g)].map((m) => m[1]!);
  return fenced.length > 0 ? fenced.join("\n") : text;
}

// ---------------------------------------------------------------------------
// Values: a default as the docs write it, and as the code has it

/** Top-level constants of the packages' sources, by name: what an expression may name. */
const constants = new Map<string, ts.Expression>();
for (const folder of ["protocol", "common", "worker", "durable-objects", "client-sdk/src"]) {
  for (const path of readdirSync(`${repo}${folder}`, { recursive: true, encoding: "utf8" })) {
    if (!path.endsWith(".ts") || path.endsWith(".d.ts")) continue;
    const file = ts.createSourceFile(path, readFileSync(`${repo}${folder}/${path}`, "utf8"), ts.ScriptTarget.ES2022, true);
    for (const statement of file.statements) {
      if (!ts.isVariableStatement(statement)) continue;
      for (const declaration of statement.declarationList.declarations) {
        if (ts.isIdentifier(declaration.name) && declaration.initializer && !constants.has(declaration.name.text)) {
          constants.set(declaration.name.text, declaration.initializer);
        }
      }
    }
  }
}

class Unevaluable extends Error {}

/** The value of a constant expression: literals, objects, arithmetic, and top-level constants by name. */
function evaluate(node: ts.Expression, depth = 0): unknown {
  if (depth > 20) throw new Unevaluable("too deep");
  const next = (expression: ts.Expression) => evaluate(expression, depth + 1);
  if (ts.isNumericLiteral(node)) return Number(node.getText().replace(/_/g, ""));
  if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
  if (node.kind === ts.SyntaxKind.TrueKeyword) return true;
  if (node.kind === ts.SyntaxKind.FalseKeyword) return false;
  if (node.kind === ts.SyntaxKind.NullKeyword) return null;
  if (ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node) || ts.isTypeAssertionExpression(node)) {
    return next(node.expression);
  }
  if (ts.isPrefixUnaryExpression(node) && node.operator === ts.SyntaxKind.MinusToken) return -(next(node.operand) as number);
  if (ts.isBinaryExpression(node)) {
    const [left, right] = [next(node.left) as number, next(node.right) as number];
    switch (node.operatorToken.kind) {
      case ts.SyntaxKind.AsteriskToken:
        return left * right;
      case ts.SyntaxKind.PlusToken:
        return left + right;
      case ts.SyntaxKind.MinusToken:
        return left - right;
      default:
        throw new Unevaluable(node.getText());
    }
  }
  if (ts.isObjectLiteralExpression(node)) {
    const value: Record<string, unknown> = {};
    for (const property of node.properties) {
      if (ts.isPropertyAssignment(property) && (ts.isIdentifier(property.name) || ts.isStringLiteral(property.name) || ts.isNumericLiteral(property.name))) {
        value[property.name.text] = next(property.initializer);
      } else if (ts.isSpreadAssignment(property)) Object.assign(value, next(property.expression));
      else throw new Unevaluable(property.getText());
    }
    return value;
  }
  if (ts.isArrayLiteralExpression(node)) return node.elements.map(next);
  if (ts.isIdentifier(node)) {
    if (node.text === "undefined") return undefined;
    const initializer = constants.get(node.text);
    if (!initializer) throw new Unevaluable(node.text);
    return next(initializer);
  }
  if (ts.isPropertyAccessExpression(node)) {
    const object = next(node.expression);
    if (typeof object !== "object" || object === null) throw new Unevaluable(node.getText());
    return (object as Record<string, unknown>)[node.name.text];
  }
  throw new Unevaluable(node.getText());
}

/** The expression written in a doc, parsed on its own. */
function parseExpression(text: string): ts.Expression {
  const file = ts.createSourceFile("default.ts", `(${text});`, ts.ScriptTarget.ES2022, true);
  const statement = file.statements[0];
  if (!statement || !ts.isExpressionStatement(statement)) throw new Unevaluable(text);
  return statement.expression;
}

/** A value the code falls back to: an expression of the sources, or one the code implies (`x !== false` is true). */
type Fallback = { node: ts.Expression } | { value: unknown; where: string };

/** Whether a doc's default and the code's fallback are the same value (or the same text, for what cannot be evaluated). */
function sameDefault(written: string, fallback: Fallback): boolean {
  if ("node" in fallback && written.replace(/\s/g, "") === fallback.node.getText().replace(/\s/g, "")) return true;
  try {
    const value = evaluate(parseExpression(written));
    return isDeepStrictEqual(value, "node" in fallback ? evaluate(fallback.node) : fallback.value);
  } catch (error) {
    if (error instanceof Unevaluable) return false;
    throw error;
  }
}

function describeFallback(fallback: Fallback): string {
  if (!("node" in fallback)) return `${JSON.stringify(fallback.value)} (${fallback.where})`;
  const file = fallback.node.getSourceFile();
  const { line } = file.getLineAndCharacterOfPosition(fallback.node.getStart());
  return `${fallback.node.getText()} (${file.fileName.slice(repo.length)}:${line + 1})`;
}

/** Every fallback in a program's sources, by the name it is the default of. */
function fallbacksOf(program: ts.Program): Map<string, Fallback[]> {
  const found = new Map<string, Fallback[]>();
  const add = (name: string, fallback: Fallback) => found.set(name, [...(found.get(name) ?? []), fallback]);
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node)) {
      const left = node.left;
      const name = ts.isPropertyAccessExpression(left) ? left.name.text : ts.isIdentifier(left) ? left.text : null;
      if (name !== null && node.operatorToken.kind === ts.SyntaxKind.QuestionQuestionToken) add(name, { node: node.right });
      if (name !== null && node.operatorToken.kind === ts.SyntaxKind.ExclamationEqualsEqualsToken && node.right.kind === ts.SyntaxKind.FalseKeyword) {
        add(name, { value: true, where: node.getText() });
      }
    }
    if ((ts.isBindingElement(node) || ts.isParameter(node)) && node.initializer) {
      const name = ts.isBindingElement(node) && node.propertyName && ts.isIdentifier(node.propertyName) ? node.propertyName : node.name;
      if (ts.isIdentifier(name)) add(name.text, { node: node.initializer });
    }
    ts.forEachChild(node, visit);
  };
  for (const file of ownSources(program)) visit(file);
  return found;
}

// ---------------------------------------------------------------------------
// The rules

/** The repository's own sources in a program (not its libraries). */
function ownSources(program: ts.Program): ts.SourceFile[] {
  return program.getSourceFiles().filter((file) => file.fileName.startsWith(repo) && !file.fileName.includes("/node_modules/") && !file.isDeclarationFile);
}

interface Example {
  owner: string;
  code: string;
}

interface Findings {
  problems: string[];
  examples: Example[];
  sees: { owner: string; target: string }[];
}

const hasModifier = (node: ts.Node, kind: ts.SyntaxKind) => ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === kind);

/** A Durable Object class: the runtime constructs it with (ctx: DurableObjectState, env). */
function isDurableObject(node: ts.ClassDeclaration): boolean {
  const constructor = node.members.find(ts.isConstructorDeclaration);
  return constructor?.parameters[0]?.type?.getText() === "DurableObjectState";
}

function returnsNothing(node: ts.SignatureDeclaration, checker: ts.TypeChecker): boolean {
  const written = node.type?.getText().replace(/\s/g, "");
  if (written !== undefined) return /^(void|Promise<void>|Awaitable<void>)$/.test(written);
  const signature = checker.getSignatureFromDeclaration(node);
  return signature !== undefined && /^(void|Promise<void>)$/.test(checker.typeToString(signature.getReturnType()));
}

function checkPackage(pkg: Package, program: ts.Program): Findings {
  const checker = program.getTypeChecker();
  const fallbacks = fallbacksOf(program);
  const findings: Findings = { problems: [], examples: [], sees: [] };
  const problem = (owner: string, text: string) => findings.problems.push(`${owner}: ${text}`);

  const noteTags = (owner: string, doc: Doc) => {
    for (const tag of doc.tags) {
      if (tag.name === "example") findings.examples.push({ owner, code: exampleCode(tag.text) });
      if (tag.name === "see") findings.sees.push({ owner, target: tag.text.split(/\s/)[0]! });
    }
  };
  const requireTags = (owner: string, doc: Doc, names: string[]) => {
    for (const name of names) if (!doc.tags.some((t) => t.name === name)) problem(owner, `no @${name}`);
  };

  /** A default written in a doc, against what the code falls back to for `name`. */
  const checkDefault = (owner: string, name: string, written: string, key: string) => {
    const elsewhere = APPLIED_ELSEWHERE[key];
    const candidates: Fallback[] = elsewhere !== undefined ? [{ node: parseExpression(elsewhere) }] : (fallbacks.get(name) ?? []);
    if (candidates.length === 0) {
      problem(owner, `@default ${written}: the code has no fallback for ${name} (add how it applies the default to APPLIED_ELSEWHERE)`);
    } else if (!candidates.some((c) => sameDefault(written, c))) {
      problem(owner, `@default ${written}, but the code falls back to ${candidates.map(describeFallback).join(" or ")}`);
    }
  };

  /** Parameters: every one named by a @param when `full` (or when any is), defaults as their initializers. */
  const checkParameters = (owner: string, node: ts.SignatureDeclaration, doc: Doc, full: boolean) => {
    const tags = doc.tags.filter((t) => t.name === "param").map((t) => parseParamTag(t.text));
    const parameters = node.parameters.filter((p) => ts.isIdentifier(p.name) && p.name.text !== "this");
    if (!full && tags.length === 0) return;
    for (const parameter of parameters) {
      const name = (parameter.name as ts.Identifier).text;
      const tag = tags.find((t) => t.name === name);
      if (!tag) {
        problem(owner, `no @param ${name}`);
        continue;
      }
      if (parameter.initializer) {
        if (tag.value === undefined) problem(owner, `@param ${name} has a default (${parameter.initializer.getText()}): write it [${name}=value]`);
        else if (!sameDefault(tag.value, { node: parameter.initializer })) {
          problem(owner, `@param [${name}=${tag.value}], but the default is ${parameter.initializer.getText()}`);
        }
      } else if (tag.value !== undefined) {
        // An interface's method: its implementations hold the default.
        const candidates = ts.isMethodSignature(node) ? (fallbacks.get(name) ?? []) : [];
        if (!candidates.some((c) => sameDefault(tag.value!, c))) problem(owner, `@param [${name}=${tag.value}], but no such default in the code`);
      }
    }
    for (const tag of tags) {
      if (!parameters.some((p) => (p.name as ts.Identifier).text === tag.name)) problem(owner, `@param ${tag.name} names no parameter`);
    }
    if (full && !returnsNothing(node, checker)) requireTags(owner, doc, ["returns"]);
  };

  /** Properties: a description, and a default as a tag, checked against the code. */
  const checkProperty = (owner: string, key: string, name: string, doc: Doc | undefined, describe: boolean) => {
    if (!doc || doc.description === "") {
      if (describe) problem(owner, "no description");
      if (!doc) return;
    }
    if (/(^|[.;(]\s*)Default\b/.test(doc.description)) problem(owner, "a default written in words: make it a @default tag");
    for (const tag of doc.tags.filter((t) => t.name === "default")) checkDefault(owner, name, tag.text, key);
  };

  const checkMembers = (typeName: string, members: ts.NodeArray<ts.TypeElement>, describe: boolean) => {
    for (const member of members) {
      if (!(ts.isPropertySignature(member) || ts.isMethodSignature(member)) || !member.name || !ts.isIdentifier(member.name)) continue;
      const name = member.name.text;
      const owner = `${typeName}.${name}`;
      const doc = docOf(member) ?? members.filter((m) => m.name && ts.isIdentifier(m.name) && m.name.text === name).map(docOf).find(Boolean);
      if (ts.isPropertySignature(member)) checkProperty(owner, owner, name, doc, describe);
      else if (doc) {
        if (doc.description === "" && describe) problem(owner, "no description");
        if (docOf(member)) checkParameters(owner, member, doc, false);
      } else if (describe) problem(owner, "no description");
    }
  };

  const checkClass = (name: string, node: ts.ClassDeclaration) => {
    const durable = isDurableObject(node);
    for (const member of node.members) {
      if (ts.isConstructorDeclaration(member)) {
        for (const parameter of member.parameters) {
          if (!ts.isIdentifier(parameter.name) || !(ts.getModifiers(parameter) ?? []).length) continue;
          const owner = `${name}.${parameter.name.text}`;
          checkProperty(owner, owner, parameter.name.text, docOf(parameter), true);
        }
        const doc = docOf(member);
        if (doc) checkParameters(`${name} constructor`, member, doc, false);
        continue;
      }
      if (!member.name || !ts.isIdentifier(member.name) || member.name.text.startsWith("_")) continue;
      if (hasModifier(member, ts.SyntaxKind.PrivateKeyword) || hasModifier(member, ts.SyntaxKind.OverrideKeyword)) continue;
      const owner = `${name}.${member.name.text}`;
      const doc = docOf(member);
      if (doc?.tags.some((t) => t.name === "internal")) continue;
      if (!doc || doc.description === "") {
        problem(owner, "no description");
        continue;
      }
      noteTags(owner, doc);
      if (ts.isMethodDeclaration(member)) {
        const inherited = hasModifier(member, ts.SyntaxKind.ProtectedKeyword);
        // An object's public methods are its RPC, called by the service's own parts; what a subclass
        // overrides or calls, and the SDK's methods, are the API.
        checkParameters(owner, member, doc, !durable || inherited);
        if (durable && inherited && /^(on|before)[A-Z]/.test(member.name.text)) requireTags(owner, doc, ["example", "see"]);
      }
    }
  };

  for (const entry of pkg.entries) {
    const file = program.getSourceFile(`${repo}${entry.file}`)!;
    const header = ts.getLeadingCommentRanges(file.text, 0)?.find((range) => file.text.startsWith("/**", range.pos));
    if (header) noteTags(entry.specifier, parseDoc(file.text.slice(header.pos, header.end)));
    for (const exported of checker.getExportsOfModule(checker.getSymbolAtLocation(file)!)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const name = exported.name;
      const declarations = symbol.declarations ?? [];
      const doc = declarations.map(docOf).find(Boolean);
      if (!doc || doc.description === "") {
        problem(name, "no JSDoc description");
        continue;
      }
      noteTags(name, doc);
      for (const declaration of declarations) {
        if (ts.isFunctionDeclaration(declaration)) {
          requireTags(name, doc, ["example", "see"]);
          if (docOf(declaration)) checkParameters(name, declaration, doc, true);
        } else if (ts.isClassDeclaration(declaration)) {
          requireTags(name, doc, ["example", "see"]);
          checkClass(name, declaration);
        } else if (ts.isInterfaceDeclaration(declaration)) {
          checkMembers(name, declaration.members, true);
        } else if (ts.isTypeAliasDeclaration(declaration)) {
          // A type alias's members are described at the alias; their defaults still hold.
          const literals = ts.isIntersectionTypeNode(declaration.type) ? declaration.type.types : [declaration.type];
          for (const literal of literals) if (ts.isTypeLiteralNode(literal)) checkMembers(name, literal.members, false);
        }
      }
    }
  }
  return findings;
}

// ---------------------------------------------------------------------------
// Programs

/** A compiler host that also serves `files` (absolute paths) from memory. */
function hostWith(options: ts.CompilerOptions, files: Map<string, string>): ts.CompilerHost {
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language, onError, create) => {
    const text = files.get(name);
    return text !== undefined ? ts.createSourceFile(name, text, language, true) : getSourceFile(name, language, onError, create);
  };
  host.fileExists = (name) => files.has(name) || ts.sys.fileExists(name);
  host.readFile = (name) => files.get(name) ?? ts.sys.readFile(name);
  host.directoryExists = (name) => [...files.keys()].some((file) => file.startsWith(`${name}/`)) || ts.sys.directoryExists(name);
  return host;
}

function format(diagnostics: readonly ts.Diagnostic[]): string {
  return ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => repo, getNewLine: () => "\n" });
}

interface Checked {
  findings: Findings;
  /** The declarations the build emits, in memory, by path. */
  declarations: Map<string, string>;
  /** The emitted declaration of each entry point. */
  declarationOf: (entry: string) => string;
  /** JSDoc of the sources' exports, by exported name (for the declarations to match). */
  docs: Map<string, string>;
}

/** The package's sources: compiled as its build does, its JSDoc checked, its declarations emitted in memory. */
function checkSources(pkg: Package): Checked {
  const outDir = `${virtualRoot}${pkg.name}`;
  const options = { ...pkg.options, declaration: true, emitDeclarationOnly: true, rootDir: repo, outDir };
  const program = ts.createProgram(
    pkg.entries.map((e) => `${repo}${e.file}`),
    options,
  );
  const errors = ts.getPreEmitDiagnostics(program);
  if (errors.length > 0) throw new Error(`the ${pkg.name}'s sources do not compile:\n${format(errors)}`);
  const declarations = new Map<string, string>();
  program.emit(undefined, (path, text) => declarations.set(path, text));
  const checker = program.getTypeChecker();
  const docs = new Map<string, string>();
  for (const entry of pkg.entries) {
    const file = program.getSourceFile(`${repo}${entry.file}`)!;
    for (const exported of checker.getExportsOfModule(checker.getSymbolAtLocation(file)!)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const doc = (symbol.declarations ?? []).map(docOf).find(Boolean);
      if (doc) docs.set(exported.name, doc.raw);
    }
  }
  return {
    findings: checkPackage(pkg, program),
    declarations,
    declarationOf: (entry) => `${outDir}/${entry.replace(/\.ts$/, ".d.ts")}`,
    docs,
  };
}

/** Names an example imports or declares itself (its own imports win over the package's). */
function namesIn(code: string): Set<string> {
  const names = new Set<string>();
  for (const match of code.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s*from/g)) {
    for (const part of match[1]!.split(",")) {
      const name = part.replace(/^\s*type\s+/, "").split(/\s+as\s+/).at(-1)!.trim();
      if (name) names.add(name);
    }
  }
  for (const match of code.matchAll(/\b(?:class|function|const|let|var|interface|type|enum)\s+([A-Za-z_$][\w$]*)/g)) names.add(match[1]!);
  return names;
}

/** Type-checks every example of `pkg` against its emitted declarations; returns the diagnostics by example. */
function checkExamples(pkg: Package, checked: Checked): string[] {
  const files = new Map(checked.declarations);
  const paths: ts.MapLike<string[]> = {};
  for (const entry of pkg.entries) paths[entry.specifier] = [checked.declarationOf(entry.file).slice(repo.length)];

  // What an example may use without importing it: every export of the package.
  const exportsOf = new Map<string, string[]>();
  const lookup = ts.createProgram(
    pkg.entries.map((e) => checked.declarationOf(e.file)),
    { ...pkg.appOptions, noEmit: true },
    hostWith(pkg.appOptions, files),
  );
  const lookupChecker = lookup.getTypeChecker();
  for (const entry of pkg.entries) {
    const file = lookup.getSourceFile(checked.declarationOf(entry.file))!;
    exportsOf.set(entry.specifier, lookupChecker.getExportsOfModule(lookupChecker.getSymbolAtLocation(file)!).map((s) => s.name));
  }

  const dir = `${virtualRoot}${pkg.name}-examples`;
  const placeholders = `${dir}/placeholders.d.ts`;
  files.set(placeholders, PLACEHOLDERS[pkg.name]);
  const owners = new Map<string, string>();
  checked.findings.examples.forEach((example, i) => {
    const own = namesIn(example.code);
    const imports = [...exportsOf].map(([specifier, names]) => {
      const wanted = names.filter((n) => !own.has(n));
      return wanted.length > 0 ? `import { ${wanted.join(", ")} } from "${specifier}";` : "";
    });
    const path = `${dir}/example-${i}.ts`;
    files.set(path, `${imports.join(" ")}\n${example.code}\nexport {};\n`);
    owners.set(path, example.owner);
  });
  const options: ts.CompilerOptions = { ...pkg.appOptions, noEmit: true, baseUrl: repo, paths };
  const program = ts.createProgram([placeholders, ...owners.keys()], options, hostWith(options, files));
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${owners.get(d.file?.fileName ?? "") ?? d.file?.fileName ?? "?"}'s @example: ${format([d]).trim()}`);
}

/** GitHub's anchor for a heading. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, "")
    .replace(/ /g, "-");
}

function headingsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const heading = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (heading) anchors.add(slug(heading[1]!));
  }
  return anchors;
}

// ---------------------------------------------------------------------------

describe.each([LIBRARY, SDK])("the $name's public API docs", (pkg) => {
  let checked: Checked;
  beforeAll(() => {
    checked = checkSources(pkg);
  }, 120_000);

  it("document every export, with the tags each kind needs, and defaults that are the code's", () => {
    expect(checked.findings.problems).toEqual([]);
    expect(checked.findings.examples.length).toBeGreaterThan(5);
  });

  it("have examples that type-check against the package's declarations", () => {
    expect(checkExamples(pkg, checked)).toEqual([]);
  }, 120_000);

  it("reach the declarations the build emits, JSDoc and all", () => {
    const options = { ...pkg.appOptions, noEmit: true };
    const program = ts.createProgram(
      pkg.entries.map((e) => checked.declarationOf(e.file)),
      options,
      hostWith(options, checked.declarations),
    );
    const checker = program.getTypeChecker();
    const carried = new Map<string, string>();
    for (const entry of pkg.entries) {
      const file = program.getSourceFile(checked.declarationOf(entry.file))!;
      for (const exported of checker.getExportsOfModule(checker.getSymbolAtLocation(file)!)) {
        const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        const doc = (symbol.declarations ?? []).map(docOf).find(Boolean);
        if (doc) carried.set(exported.name, doc.raw);
      }
    }
    const strip = (raw: string | undefined) => raw?.replace(/^\s*\*?/gm, "").trim();
    for (const [name, raw] of checked.docs) expect(strip(carried.get(name)), name).toBe(strip(raw));
    expect(checked.docs.size).toBeGreaterThan(20);
  });

  it("point @see at files and headings that exist", () => {
    const missing: string[] = [];
    for (const { owner, target } of checked.findings.sees) {
      const [path, anchor] = target.split("#") as [string, string | undefined];
      if (!existsSync(`${repo}${path}`)) missing.push(`${owner}: @see ${target}: no such file`);
      else if (anchor !== undefined && !headingsOf(readFileSync(`${repo}${path}`, "utf8")).has(anchor)) {
        missing.push(`${owner}: @see ${target}: no such heading`);
      }
    }
    expect(missing).toEqual([]);
  });
});
