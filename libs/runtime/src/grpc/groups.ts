import type { DescMessage, DescMethod, DescService } from '@bufbuild/protobuf';
import { commonv1 } from '@agenthub/proto';
import { deadlineExceeded } from '../abort.js';
import { HubError, Reason } from '../errors.js';
import type { GroupedSignature } from './signature.js';
import { fromDetail } from './status.js';

/** Most calls one group carries; a service refuses a larger group. */
export const MAX_GROUPED_CALLS = 64;
/**
 * Lone calls one client has on the wire at once for one method: two callers at once each go out
 * at once. Beside a group nothing else goes (but a full group, below).
 */
const LONE_CALLS_IN_FLIGHT = 2;
/** Full groups (MAX_GROUPED_CALLS) one client has on the wire at once while more wait. */
const FULL_GROUPS_IN_FLIGHT = 2;
/**
 * After a service answers that it has no such twin (an older version, during a rolling update),
 * how long its client sends every call alone before trying a group again.
 */
export const TWIN_MISSING_MS = 60_000;

/**
 * How a unary method's grouped twin is shaped (messaging's SendMessages for SendMessage): a unary
 * method named as the single one in the plural (`s`, or `es` after an `s`), whose request's one
 * field lists items of the single request (`request`) and its `common.v1.CallSignature`
 * (`signature`), and whose response's one field lists outcomes with a oneof of the single response
 * and a `common.v1.ErrorDetail`.
 */
export interface GroupShape {
  single: DescMethod;
  twin: DescMethod;
  /** The twin request's field listing the calls. */
  calls: string;
  /** The twin response's field listing the outcomes, and their oneof. */
  outcomes: string;
  oneof: string;
  responseCase: string;
  errorCase: string;
}

/** The grouped twin of `single` in `service`, when the service declares one (see GroupShape). */
export function groupShape(service: DescService, single: DescMethod): GroupShape | undefined {
  const twin = service.methods.find((method) => method.name === twinName(single.name));
  if (!twin || single.methodKind !== 'unary' || twin.methodKind !== 'unary') return undefined;
  const calls = onlyListOf(twin.input);
  const outcomes = onlyListOf(twin.output);
  if (!calls || !outcomes) return undefined;
  const request = calls.message.fields.find((field) => field.fieldKind === 'message' && field.message.typeName === single.input.typeName);
  const signature = calls.message.fields.find((field) => field.fieldKind === 'message' && field.message.typeName === commonv1.CallSignatureSchema.typeName);
  const oneof = outcomes.message.oneofs[0];
  const responseCase = oneof?.fields.find((field) => field.fieldKind === 'message' && field.message.typeName === single.output.typeName);
  const errorCase = oneof?.fields.find((field) => field.fieldKind === 'message' && field.message.typeName === commonv1.ErrorDetailSchema.typeName);
  if (request?.localName !== 'request' || signature?.localName !== 'signature' || !oneof || !responseCase || !errorCase) return undefined;
  return { single, twin, calls: calls.field, outcomes: outcomes.field, oneof: oneof.localName, responseCase: responseCase.localName, errorCase: errorCase.localName };
}

/** The single method's name in the plural: SendMessages, ResolveAccesses. */
function twinName(single: string): string {
  return single.endsWith('s') ? `${single}es` : `${single}s`;
}

function onlyListOf(message: DescMessage): { field: string; message: DescMessage } | undefined {
  const [field, ...rest] = message.fields;
  if (!field || rest.length || field.fieldKind !== 'list' || field.listKind !== 'message') return undefined;
  return { field: field.localName, message: field.message };
}

/** One call of a group as the twin's request lists it. */
export interface GroupedCall {
  request: unknown;
  signature: GroupedSignature;
}

/** A twin's outcome for one call, as protobuf-es shapes its oneof. */
export type GroupedOutcome = Record<string, { case: string | undefined; value?: unknown }>;

/** The single response of an outcome, or the HubError its call failed with. */
export function settleOutcome(shape: GroupShape, outcome: GroupedOutcome | undefined): unknown {
  const result = outcome?.[shape.oneof];
  if (result?.case === shape.responseCase) return result.value;
  if (result?.case === shape.errorCase) throw fromDetail(result.value as commonv1.ErrorDetail);
  throw new HubError(Reason.INTERNAL, 'Internal error', { cause: new Error(`${shape.twin.name} answered a call with no outcome`) });
}

interface Waiting {
  alone: () => Promise<unknown>;
  call: GroupedCall;
  deadline: Date;
  resolve(response: unknown): void;
  reject(err: unknown): void;
  /** Stops waiting for a group when the caller leaves first. */
  detach(): void;
}

/**
 * Sends a client's calls of one method: at once and alone while no group and fewer than two lone
 * calls are on the wire, else together with the calls that come meanwhile, in one call of the
 * twin, when one on the wire finishes (a second group beside a group only when a full one waits).
 * One process's gRPC call costs about as much CPU as a send's own work, on each side; under load a
 * group of n pays it once for n, and with one group on the wire each group carries every call that
 * came while the last was out. Two lone calls at once spare two callers at once (the light load)
 * the wait for each other's round trip; a third caller makes a group.
 */
export class CallGroups {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;
  private groupsInFlight = 0;
  private aloneUntil = 0;

  constructor(
    /**
     * The twin, for several; answers with one outcome per call, in order, or undefined when the
     * service does not implement it.
     */
    private readonly together: (calls: GroupedCall[], deadline: Date) => Promise<readonly GroupedOutcome[] | undefined>,
    private readonly shape: GroupShape,
  ) {}

  /** `alone` sends this very call when it goes out by itself; `call` gives what a group carries of it. */
  send(alone: () => Promise<unknown>, call: () => GroupedCall, deadline: Date, signal: AbortSignal | undefined): Promise<unknown> {
    if ((this.waiting.length === 0 && this.mayGo()) || Date.now() < this.aloneUntil) return this.run(alone, false);
    if (signal?.aborted) return Promise.reject(new HubError(Reason.UNAVAILABLE, 'The call was cancelled'));
    return new Promise((resolve, reject) => {
      const leave = () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(new HubError(Reason.UNAVAILABLE, 'The call was cancelled'));
      };
      const entry: Waiting = { alone, call: call(), deadline, resolve, reject, detach: () => signal?.removeEventListener('abort', leave) };
      signal?.addEventListener('abort', leave, { once: true });
      this.waiting.push(entry);
    });
  }

  /** Whether the next call or group may go out now: while no group is on the wire and fewer than two lone calls are. */
  private mayGo(): boolean {
    return this.groupsInFlight === 0 && this.inFlight < LONE_CALLS_IN_FLIGHT;
  }

  private async run(work: () => Promise<unknown>, grouped: boolean): Promise<unknown> {
    this.inFlight += 1;
    if (grouped) this.groupsInFlight += 1;
    try {
      return await work();
    } finally {
      this.inFlight -= 1;
      if (grouped) this.groupsInFlight -= 1;
      this.next();
    }
  }

  private next(): void {
    while (this.waiting.length > 0 && (this.mayGo() || (this.inFlight < FULL_GROUPS_IN_FLIGHT && this.waiting.length >= MAX_GROUPED_CALLS))) {
      const group = this.waiting.splice(0, MAX_GROUPED_CALLS);
      for (const entry of group) entry.detach();
      void this.run(() => this.flush(group), group.length > 1);
    }
  }

  private async flush(waited: Waiting[]): Promise<void> {
    // A call that waited out its deadline is not sent: its caller has given up on it.
    const now = Date.now();
    const group: Waiting[] = [];
    for (const entry of waited) {
      if (entry.deadline.getTime() > now) group.push(entry);
      else entry.reject(deadlineExceeded());
    }
    if (group.length === 0) return;
    try {
      if (group.length === 1) {
        group[0]!.resolve(await group[0]!.alone());
        return;
      }
      // The group lasts as long as its longest call may; each call's own expiry still bounds it.
      const deadline = new Date(Math.max(...group.map((entry) => entry.deadline.getTime())));
      const outcomes = await this.together(group.map((entry) => entry.call), deadline);
      if (!outcomes) {
        this.aloneUntil = Date.now() + TWIN_MISSING_MS;
        await Promise.all(group.map((entry) => entry.alone().then(entry.resolve, entry.reject)));
        return;
      }
      group.forEach((entry, at) => {
        try {
          entry.resolve(settleOutcome(this.shape, outcomes[at]));
        } catch (err) {
          entry.reject(err);
        }
      });
    } catch (err) {
      for (const entry of group) entry.reject(err);
    }
  }
}

const TWINS = new WeakMap<object, (request: never) => void>();

/**
 * The handler a service gives its grouped twin: GrpcServer runs each call of a group through the
 * single method's handler as if it had come alone (its signature, deadline, metrics, failure log),
 * and answers with every outcome. `refuse` throws for a call no group may carry.
 */
export function groupedHandler<R>(refuse: (request: R) => void = () => undefined): (request: unknown, ctx: unknown) => Promise<never> {
  const handler = async (): Promise<never> => {
    throw new Error('A grouped twin is served by GrpcServer.add');
  };
  TWINS.set(handler, refuse as (request: never) => void);
  return handler;
}

/** What `groupedHandler` was given, when `handler` is one. */
export function twinRefusal(handler: unknown): ((request: never) => void) | undefined {
  return typeof handler === 'function' ? TWINS.get(handler) : undefined;
}
