import { DEFAULTS } from "../client-sdk/src/protocol";

export type Limits = { -readonly [K in keyof typeof DEFAULTS]: number };

/**
 * Reads every limit from the environment's vars, falling back to the protocol
 * defaults. A var that is not a non-negative integer is ignored (and logged)
 * rather than taking the service down.
 */
export function readLimits(env: Record<string, unknown>): Limits {
  const limits = { ...DEFAULTS } as Limits;
  for (const key of Object.keys(DEFAULTS) as (keyof Limits)[]) {
    const raw = env[key];
    if (raw === undefined || raw === null || raw === "") continue;
    const value = Number(raw);
    if (Number.isSafeInteger(value) && value >= 0) {
      limits[key] = value;
    } else {
      console.warn(JSON.stringify({ event: "bad_config", var: key, value: String(raw) }));
    }
  }
  return limits;
}
