import { createHmac, createSecretKey, randomBytes } from 'node:crypto';

/** Standard Webhooks secrets: `whsec_` and the base64 of the key bytes. */
const PREFIX = 'whsec_';

export function newSigningSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, the key being the decoded secret. */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  // A KeyObject: Node 24 takes a slower path for a Buffer key on every createHmac, four times the HMAC's cost.
  const key = createSecretKey(Buffer.from(secret.slice(PREFIX.length), 'base64'));
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/**
 * The headers of one attempt. Several secrets (during a rotation window) give several
 * signatures, space-separated, so the receiver accepts whichever secret it holds.
 */
export function webhookHeaders(secrets: string[], id: string, timestamp: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => sign(secret, id, timestamp, body)).join(' '),
  };
}
