import type { Limits } from "../common/settings";
import type { ForwardEnv } from "./auth";
import type { Env } from "./env";

/**
 * The fan-out app's Hono environment: its bindings (`Env`), and what its
 * middleware sets for the routes (the limits read from the vars, the
 * validated room name).
 *
 * @see docs/library.md#the-worker
 */
export type FanoutAppEnv = { Bindings: Env; Variables: { limits: Limits; room: string } & ForwardEnv["Variables"] };
