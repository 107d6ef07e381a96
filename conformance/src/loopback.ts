/**
 * The suite's loopback rule: without --allow-remote it talks only to this
 * machine. A name is judged by the addresses it resolves to, not by how it
 * looks: `anything.localhost` is a loopback name by convention only, and a
 * resolver that does not know the convention sends it to DNS.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";

/** Whether `address` (an IP literal) is a loopback address: 127.0.0.0/8, ::1, or ::ffff:127.x.y.z. */
export function isLoopbackAddress(address: string): boolean {
  const ip = address.replace(/^\[|\]$/g, "").toLowerCase();
  if (isIP(ip) === 4) return ip.startsWith("127.");
  if (isIP(ip) !== 6) return false;
  if (ip === "::1" || ip === "0:0:0:0:0:0:0:1") return true;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(ip)?.[1];
  return mapped !== undefined && mapped.startsWith("127.");
}

/** Resolves a host name to every address it has. */
export type Resolver = (hostname: string) => Promise<string[]>;

const systemResolver: Resolver = async (hostname) => (await lookup(hostname, { all: true })).map((a) => a.address);

/**
 * Why `hostname` (as URL parses it) is not this machine, or null when every
 * address it resolves to is a loopback address.
 */
export async function loopbackProblem(hostname: string, resolve: Resolver = systemResolver): Promise<string | null> {
  const host = hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) !== 0) return isLoopbackAddress(host) ? null : `${host} is not a loopback address`;
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch (error) {
    const code = (error as { code?: string }).code ?? String(error);
    return `${host} does not resolve (${code}), so it is not known to be a loopback address`;
  }
  const remote = addresses.filter((address) => !isLoopbackAddress(address));
  if (addresses.length === 0) return `${host} resolves to no address`;
  return remote.length === 0 ? null : `${host} resolves to ${remote.join(", ")}, not a loopback address`;
}
