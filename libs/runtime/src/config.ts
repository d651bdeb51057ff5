import { isIP } from 'node:net';
import { z } from 'zod';
import { MAX_AUTH_CACHE_MS } from './auth-cache.js';
import { ConfigError } from './config-error.js';
import { DEFAULT_MAX_CONNECTION_AGE_GRACE_MS, DEFAULT_MAX_CONNECTION_AGE_MS } from './grpc/server.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().positive();
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const isAddressOrRange = (entry: string) => {
  const [address = '', prefix, ...rest] = entry.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
};
const isBaseUrl = (value: string) => {
  try {
    const u = new URL(value);
    return (u.protocol === 'https:' || u.protocol === 'http:') && !u.search && !u.hash && !u.username && !u.password;
  } catch {
    return false;
  }
};
const url = (protocols: string[]) =>
  z.string().refine((value) => {
    try {
      return protocols.includes(new URL(value).protocol);
    } catch {
      return false;
    }
  }, `must be a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`);

/**
 * Every setting of every AgentHub process, read from the environment once at start.
 * The README's configuration reference lists the same variables; keep the two together.
 */
const schema = z.object({
  HUB_HOST: z.string().min(1).default('127.0.0.1'),
  HUB_PORT: port.default(8080),
  HUB_DATA_DIR: z.string().min(1).default('./.agenthub'),
  // Where embedded (PGlite) databases live without DATABASE_URL: files under HUB_DATA_DIR, or
  // memory only (nothing survives the process: a throwaway hub, and test hubs that never restart).
  HUB_EMBEDDED_STORAGE: z.enum(['disk', 'memory']).default('disk'),
  HUB_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  DATABASE_URL: url(['postgres:', 'postgresql:']).optional(),
  DATABASE_POOL_SIZE: positiveInt.default(10),
  // Off: every statement is parsed and planned on each call, for data on which a prepared
  // statement's generic plan does worse, or backends short of memory. Not a way to run behind a
  // transaction-mode pooler: migrations' advisory locks and LISTEN need a session either way.
  DATABASE_PREPARED_STATEMENTS: bool.default(true),
  REDIS_URL: url(['redis:', 'rediss:']).optional(),
  REDIS_PREFIX: z.string().default('agenthub:'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // `auto`: readable lines on a terminal, JSON lines anywhere else (a pipe, a file, a container log).
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  // `development` (unset): one info line per HTTP request; anything else (the image sets
  // `production`): those lines only at debug.
  NODE_ENV: z.string().min(1).default('development'),
  // The no-color.org convention: any value turns off colours in the pretty log format.
  NO_COLOR: z.string().optional(),
  GRPC_HOST: z.string().min(1).default('127.0.0.1'),
  GRPC_PORT: port.default(50051),
  // Ops endpoint of a split-mode service process (/metrics, /healthz, /readyz); host defaults to GRPC_HOST.
  OPS_HOST: z.string().min(1).optional(),
  OPS_PORT: port.default(9090),
  // gRPC servers recycle client connections this old (clients re-resolve DNS and reach replicas
  // added since); calls running on a recycled connection get the grace to finish.
  GRPC_MAX_CONNECTION_AGE_MS: positiveInt.default(DEFAULT_MAX_CONNECTION_AGE_MS),
  GRPC_MAX_CONNECTION_AGE_GRACE_MS: positiveInt.default(DEFAULT_MAX_CONNECTION_AGE_GRACE_MS),
  IDENTITY_ADDR: z.string().min(1).optional(),
  WORKSPACE_ADDR: z.string().min(1).optional(),
  SECRETS_ADDR: z.string().min(1).optional(),
  MESSAGING_ADDR: z.string().min(1).optional(),
  // Messaging: longest SendMessage blocking wait; how often expired deliveries are swept; how long
  // after its last inbox poll a connected agent counts as online.
  MESSAGING_BLOCKING_MS: positiveInt.max(60_000).default(60_000),
  MESSAGING_SWEEP_MS: positiveInt.default(5_000),
  MESSAGING_ONLINE_MS: positiveInt.default(60_000),
  // How long a delivery handed to a connected agent stays hidden, waiting for its ack, before it is
  // handed out again (same delivery id).
  MESSAGING_CLAIM_MS: positiveInt.default(30_000),
  // Serialized bytes of all messages and artifacts of one task; GetTask returns them in one gRPC
  // message (8 MiB), so at most 6 MiB.
  MESSAGING_TASK_MAX_BYTES: positiveInt.max(6 * 1024 * 1024).default(4 * 1024 * 1024),
  // Signs every internal gRPC call (base64 of ≥ 32 random bytes; split mode requires it, the
  // all-in-one mode makes its own). Checked, never echoed, by InternalKey.fromBase64.
  HUB_INTERNAL_KEY: z.string().min(1).optional(),
  // Mutual TLS between split-mode processes: all three PEM files, or none.
  GRPC_TLS_CERT_FILE: z.string().min(1).optional(),
  GRPC_TLS_KEY_FILE: z.string().min(1).optional(),
  GRPC_TLS_CA_FILE: z.string().min(1).optional(),
  // How long a repeated (sender, messageId) is the same SendMessage rather than a new one.
  MESSAGING_IDEMPOTENCY_WINDOW_MS: positiveInt.default(24 * 3600_000),
  HUB_GRPC_TIMEOUT_MS: positiveInt.default(10_000),
  HUB_TRANSPORT: z.enum(['grpc', 'inproc']).default('grpc'),
  // `serve all`: the gateway in a process of its own beside the services' (auto: where the
  // backends are shared servers and the machine has a second core).
  HUB_PROCESSES: z.enum(['auto', '1', '2']).default('auto'),
  HUB_MAX_BODY_BYTES: positiveInt.default(1024 * 1024),
  HUB_MAX_BATCH: positiveInt.default(50),
  HUB_AUTH_CACHE_MS: z.coerce.number().int().min(0).max(MAX_AUTH_CACHE_MS).default(30_000),
  // Gateway: SSE streams end cleanly after this long; the client reconnects with Last-Event-ID.
  HUB_STREAM_MAX_MS: positiveInt.default(30 * 60_000),
  // Rate limits (token buckets, per second and burst; 0 a second turns one off) and the cap on
  // each agent's waiting calls. Operators override them per tenant (`agenthub tenants limits`).
  HUB_RATE_KEY_PER_SEC: z.coerce.number().min(0).default(300),
  HUB_RATE_KEY_BURST: positiveInt.default(600),
  HUB_RATE_TENANT_PER_SEC: z.coerce.number().min(0).default(1_000),
  HUB_RATE_TENANT_BURST: positiveInt.default(2_000),
  HUB_RATE_ADDRESS_PER_SEC: z.coerce.number().min(0).default(10),
  HUB_RATE_ADDRESS_BURST: positiveInt.default(200),
  HUB_RATE_TRUST_FORWARDED_FOR: bool.default(false),
  HUB_MAX_WAITING_PER_AGENT: positiveInt.default(100),
  // Quotas, checked by the service that owns the resource; a refusal names the quota.
  HUB_QUOTA_WORKSPACES_PER_TENANT: positiveInt.default(1_000),
  HUB_QUOTA_MEMORIES_PER_WORKSPACE: positiveInt.default(100_000),
  HUB_QUOTA_MEMORY_BYTES_PER_WORKSPACE: positiveInt.default(256 * 1024 * 1024),
  // 0 turns the quota off (as rate 0 turns a rate limit off).
  HUB_QUOTA_TASKS_IN_FLIGHT_PER_SENDER: z.coerce.number().int().min(0).default(1_000),
  // Overridable per tenant (`agenthub tenants limits --quota`).
  HUB_QUOTA_AGENTS_PER_TENANT: positiveInt.default(10_000),
  HUB_QUOTA_MEMBERS_PER_WORKSPACE: positiveInt.default(1_000),
  // 0 turns it off, as for tasks in flight (the other quota on the send path).
  HUB_QUOTA_QUEUED_DELIVERIES_PER_AGENT: z.coerce.number().int().min(0).default(10_000),
  HUB_SHUTDOWN_GRACE_MS: positiveInt.default(10_000),
  HUB_METRICS: bool.default(true),
  // Per-tenant metric series are bounded: the first N refused tenants keep their own label in
  // agenthub_limited_requests_total, and each quota's gauges show the N tenants nearest the limit.
  HUB_METRICS_TENANTS: positiveInt.default(100),
  // How long one read of quota usage (a grouped query over all tenants) serves scrapes.
  HUB_METRICS_QUOTA_REFRESH_MS: z.coerce.number().int().min(0).default(60_000),
  // Gateway: the public base URL the hub is reached at (`https://hub.example.com`), from which
  // Agent Cards build their links; without it, from the request (forwarded headers honoured only
  // from HUB_TRUSTED_PROXIES, comma-separated addresses or CIDR ranges).
  HUB_PUBLIC_URL: z
    .string()
    .refine(isBaseUrl, 'must be an http:// or https:// URL without query, fragment or credentials')
    .transform((value) => value.replace(/\/+$/, ''))
    .optional(),
  HUB_TRUSTED_PROXIES: z
    .string()
    .transform((text) => text.split(',').map((entry) => entry.trim()).filter(Boolean))
    .refine((entries) => entries.every(isAddressOrRange), 'must be comma-separated IP addresses or CIDR ranges (10.0.0.0/8)')
    .optional(),
  // Gateway: how deep JSON-RPC params may nest (objects and arrays, `data` parts included).
  HUB_MAX_JSON_DEPTH: z.coerce.number().int().min(4).max(256).default(32),
  // Key-encryption keys of the secrets service, `v2:<base64 of 32 bytes>,v1:<…>`; the highest
  // version wraps, every listed one unwraps. Parsed (and checked) by the secrets service, whose
  // messages never echo key material.
  HUB_KEKS: z.string().min(1).optional(),
  // Memories (workspace service). Without EMBEDDINGS_URL the built-in Universal Sentence Encoder
  // lite embeds offline in EMBEDDINGS_THREADS worker threads; with it, an OpenAI-compatible
  // `/v1/embeddings` endpoint does (EMBEDDINGS_MODEL required, EMBEDDINGS_API_KEY never logged).
  EMBEDDINGS_URL: url(['http:', 'https:']).optional(),
  EMBEDDINGS_MODEL: z.string().min(1).max(200).optional(),
  EMBEDDINGS_API_KEY: z.string().min(1).optional(),
  EMBEDDINGS_TIMEOUT_MS: positiveInt.default(30_000),
  EMBEDDINGS_THREADS: z.coerce.number().int().min(1).max(16).optional(),
  // Texts waiting for the built-in model's workers; past it a store or query is refused, retryable.
  EMBEDDINGS_MAX_QUEUE: positiveInt.default(1_000),
  // Vectors in Qdrant when set, else exact search over vectors kept in the workspace schema.
  QDRANT_URL: url(['http:', 'https:']).optional(),
  QDRANT_API_KEY: z.string().min(1).optional(),
  // Push agents: longest pause between delivery attempts to an unreachable A2A endpoint.
  MESSAGING_PUSH_MAX_BACKOFF_MS: positiveInt.default(30_000),
  MESSAGING_PUSH_TIMEOUT_MS: positiveInt.default(30_000),
  // Largest answer read from a push agent; a longer one fails the task (egress guard).
  MESSAGING_PUSH_MAX_RESPONSE_BYTES: positiveInt.default(4 * 1024 * 1024),
  // Calls to push agents one messaging replica makes at once (a quarter of them per tenant), and to one agent.
  MESSAGING_PUSH_CONCURRENCY: positiveInt.default(64),
  MESSAGING_PUSH_CONCURRENCY_PER_AGENT: positiveInt.default(8),
  // Event log: Kafka when KAFKA_BROKERS (`host:port,host:port`) is set, else the embedded bus.
  KAFKA_BROKERS: z.string().min(1).optional(),
  KAFKA_CLIENT_ID: z.string().min(1).default('agenthub'),
  // Kafka over TLS (KAFKA_SSL_CA_FILE implies it) and SASL; the password is never logged.
  KAFKA_SSL: bool.default(false),
  KAFKA_SSL_CA_FILE: z.string().min(1).optional(),
  KAFKA_SASL_MECHANISM: z.enum(['plain', 'scram-sha-256', 'scram-sha-512']).optional(),
  KAFKA_SASL_USERNAME: z.string().min(1).optional(),
  KAFKA_SASL_PASSWORD: z.string().min(1).optional(),
  // How often each service's outbox relay looks for unpublished rows (it is also woken on writes).
  OUTBOX_POLL_MS: positiveInt.default(200),
  // Least time between two relay passes that commits wake: commits closer together share a pass.
  OUTBOX_PASS_INTERVAL_MS: z.coerce.number().int().min(0).max(1_000).default(25),
  EVENTS_ADDR: z.string().min(1).optional(),
  // Every outbound call (webhooks, push agents, embedding provider): allow targets outside global
  // unicast space (private, loopback, link-local, metadata, …) — tests, labs, in-cluster targets.
  HUB_EGRESS_ALLOW_PRIVATE: bool.default(false),
  // Deprecated alias of HUB_EGRESS_ALLOW_PRIVATE (it now covers all egress, not only webhooks).
  HUB_WEBHOOK_ALLOW_PRIVATE: bool.default(false),
  WEBHOOK_TIMEOUT_MS: positiveInt.default(10_000),
  // Days finished webhook deliveries (and their attempts) are kept for deliveries/replay.
  WEBHOOK_HISTORY_DAYS: positiveInt.default(30),
  // Delays before each retry of a failed webhook delivery, `0,5000,…` in milliseconds; default
  // 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (the events service's README).
  WEBHOOK_RETRY_SCHEDULE_MS: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be comma-separated milliseconds')
    .transform((text) => text.split(',').map(Number))
    .optional(),
  // Tracing (OpenTelemetry, OTLP over HTTP): off unless an endpoint or OTEL_TRACES_EXPORTER=otlp is
  // set. The exporter also reads the other standard OTEL_EXPORTER_OTLP_* variables (headers, timeout).
  OTEL_EXPORTER_OTLP_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url(['http:', 'https:']).optional(),
  OTEL_TRACES_EXPORTER: z.enum(['otlp', 'none']).optional(),
  OTEL_SDK_DISABLED: bool.default(false),
  OTEL_SERVICE_NAME: z.string().min(1).optional(),
});

export type HubConfig = z.infer<typeof schema>;

export { ConfigError };

/** Whether outbound calls may reach addresses outside global unicast space (either spelling). */
export function egressAllowPrivate(config: Pick<HubConfig, 'HUB_EGRESS_ALLOW_PRIVATE' | 'HUB_WEBHOOK_ALLOW_PRIVATE'>): boolean {
  return config.HUB_EGRESS_ALLOW_PRIVATE || config.HUB_WEBHOOK_ALLOW_PRIVATE;
}

/** Parses the environment, reporting every bad variable at once by name. */
export function loadConfig(env: Record<string, string | undefined> = process.env): HubConfig {
  return parseEnv(schema, env);
}

function parseEnv<S extends z.ZodType>(shape: S, env: Record<string, string | undefined>): z.infer<S> {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = shape.safeParse(present);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
  throw new ConfigError(`Invalid configuration:\n${problems.join('\n')}`);
}

const cliSchema = schema.pick({ HUB_PORT: true, HUB_DATA_DIR: true, HUB_ADMIN_TOKEN: true }).extend({ HUB_URL: url(['http:', 'https:']).optional() });

/** What the administration commands read: the hub's address and where its operator token is. */
export type CliConfig = z.infer<typeof cliSchema>;

/**
 * The administration commands' settings, checked by the same rules as the hub's (loadConfig);
 * only these variables, so a command is not refused for a server setting it never uses.
 */
export function loadCliConfig(env: Record<string, string | undefined> = process.env): CliConfig {
  return parseEnv(cliSchema, env);
}
