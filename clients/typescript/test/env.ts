// The servers tests/clients started for this suite (go test ./tests/clients runs it).
import { readFileSync } from "node:fs";

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this suite through go test ./tests/clients/ -run TestTypeScriptClient (or make clients-test)`);
  return v;
}

/** The leash on the memory store. */
export const url = need("LEASH_URL");
/** The leash on a Redis that outage() stops. */
export const redisUrl = need("LEASH_REDIS_URL");
/** The accounts' keys by name: scale, free, operator, unknown. */
export const keys: Record<string, string> = JSON.parse(need("LEASH_KEYS"));
const outageUrl = need("LEASH_OUTAGE_URL");

/** Stops the Redis under redisUrl for ms. */
export async function outage(ms: number): Promise<void> {
  const res = await fetch(`${outageUrl}?ms=${ms}`, { method: "POST" });
  if (res.status !== 204) throw new Error(`outage: ${res.status}`);
}

/** The repository's clients/ folder. */
export const clientsDir = need("LEASH_CLIENTS_DIR");

/** A JSON file of clients/. */
export function clientsFile<T>(name: string): T {
  return JSON.parse(readFileSync(`${clientsDir}/${name}`, "utf8")) as T;
}

/** A fresh name for this run. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.floor(Math.random() * 1e6).toString(36)}`;
}
