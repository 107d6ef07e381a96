// Prints wrangler.toml as wrangler reads it (vars, bindings, dates) as JSON.
// It runs in its own process because importing wrangler installs signal
// handlers that would exit the launcher before it can close sockets gracefully.
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { unstable_readConfig } = await import(require.resolve("wrangler"));
const config = unstable_readConfig({ config: process.argv[2] }, { hideWarnings: true });
process.stdout.write(
  JSON.stringify({
    main: config.main ?? null,
    compatibility_date: config.compatibility_date,
    compatibility_flags: config.compatibility_flags ?? [],
    vars: config.vars ?? {},
    durable_objects: config.durable_objects,
    migrations: config.migrations ?? [],
  }),
);
