// Reads a `.dev.vars` file, the `wrangler dev` convention for local vars and
// secrets: dotenv syntax, one KEY=VALUE a line.
//
//   # comment
//   PUBLISH_KEY=dev-key
//   export TOKEN_SECRET="dev secret"     # `export` and inline comments are allowed
//   ALLOWED_ORIGINS='http://localhost:5173'
//   MULTI="line one\nline two"           # double quotes expand \n, \r, \t, \" and \\
//
// Values are never printed: a malformed line is reported by its number only.

import { readFileSync } from "node:fs";

const KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** @param {string} body the text inside double quotes */
function unescapeDouble(body) {
  return body.replace(/\\([nrt"\\])/g, (_, c) => ({ n: "\n", r: "\r", t: "\t", '"': '"', "\\": "\\" })[c]);
}

/**
 * Parses dotenv text. A later line wins over an earlier one with the same key.
 * @param {string} text
 * @returns {{ vars: Record<string, string>; malformed: number[] }} malformed: 1-based line numbers
 */
export function parseDevVars(text) {
  /** @type {Record<string, string>} */
  const vars = {};
  const malformed = [];
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  for (let i = 0; i < lines.length; i++) {
    const lineNumber = i + 1;
    const line = (lines[i] ?? "").trim();
    if (line === "" || line.startsWith("#")) continue;
    const statement = line.replace(/^export\s+/, "");
    const eq = statement.indexOf("=");
    const key = eq > 0 ? statement.slice(0, eq).trim() : "";
    if (!KEY.test(key)) {
      malformed.push(lineNumber);
      continue;
    }
    let rest = statement.slice(eq + 1).trimStart();
    const quote = rest[0];
    if (quote === '"' || quote === "'" || quote === "`") {
      // A quoted value may run over several lines, up to the closing quote.
      let body = rest.slice(1);
      let close = body.indexOf(quote);
      while (close === -1 && i + 1 < lines.length) {
        i += 1;
        body += `\n${lines[i]}`;
        close = body.indexOf(quote);
      }
      if (close === -1) {
        malformed.push(lineNumber);
        continue;
      }
      const value = body.slice(0, close);
      const after = body.slice(close + 1).trim();
      if (after !== "" && !after.startsWith("#")) {
        malformed.push(lineNumber);
        continue;
      }
      vars[key] = quote === '"' ? unescapeDouble(value) : value;
      continue;
    }
    // Unquoted: up to an inline comment (a # after whitespace), trimmed.
    const comment = rest.search(/\s#/);
    if (comment !== -1) rest = rest.slice(0, comment);
    vars[key] = rest.trim();
  }
  return { vars, malformed };
}

/**
 * Reads and parses `path`; a missing file is no vars.
 * @param {string} path
 * @returns {{ found: boolean; vars: Record<string, string>; malformed: number[] }}
 */
export function readDevVars(path) {
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (/** @type {NodeJS.ErrnoException} */ (error).code === "ENOENT") return { found: false, vars: {}, malformed: [] };
    throw error;
  }
  return { found: true, ...parseDevVars(text) };
}
