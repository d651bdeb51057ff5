import { messagingv1 } from '@agenthub/proto';

const { TaskState } = messagingv1;
type TaskState = messagingv1.TaskState;

/** A task state as the interface's dialect writes it, and as the messaging service stores it. */
export type StateWord = 'submitted' | 'working' | 'input-required' | 'completed' | 'failed' | 'canceled' | 'rejected';

/**
 * The one state table: each hub state's proto value, interface word and A2A 1.0 enum name. The A2A
 * names match the proto's; the numbers do not (A2A puts completed at 3), so only names cross wires.
 */
export const STATES: readonly { readonly state: TaskState; readonly word: StateWord; readonly a2a: string }[] = [
  { state: TaskState.SUBMITTED, word: 'submitted', a2a: 'TASK_STATE_SUBMITTED' },
  { state: TaskState.WORKING, word: 'working', a2a: 'TASK_STATE_WORKING' },
  { state: TaskState.INPUT_REQUIRED, word: 'input-required', a2a: 'TASK_STATE_INPUT_REQUIRED' },
  { state: TaskState.COMPLETED, word: 'completed', a2a: 'TASK_STATE_COMPLETED' },
  { state: TaskState.FAILED, word: 'failed', a2a: 'TASK_STATE_FAILED' },
  { state: TaskState.CANCELED, word: 'canceled', a2a: 'TASK_STATE_CANCELED' },
  { state: TaskState.REJECTED, word: 'rejected', a2a: 'TASK_STATE_REJECTED' },
];

/** The interface words, in lifecycle order (for "must be one of" messages). */
export const STATE_WORDS: readonly StateWord[] = STATES.map((s) => s.word);
/** The A2A 1.0 names the hub has. */
export const A2A_STATE_NAMES: readonly string[] = STATES.map((s) => s.a2a);

const byState = new Map(STATES.map((s) => [s.state, s]));
const byWord = new Map<string, (typeof STATES)[number]>(STATES.map((s) => [s.word, s]));
const byA2A = new Map<string, (typeof STATES)[number]>(STATES.map((s) => [s.a2a, s]));

/** The word of a proto state; undefined for UNSPECIFIED or a value this build does not know. */
export const wordOf = (state: TaskState): StateWord | undefined => byState.get(state)?.word;
/** The proto state of a word; undefined when `word` is not one. */
export const stateOfWord = (word: string): TaskState | undefined => byWord.get(word)?.state;
/** The A2A name of a proto state; `TASK_STATE_UNSPECIFIED` for one the table lacks. */
export const a2aNameOf = (state: TaskState): string => byState.get(state)?.a2a ?? 'TASK_STATE_UNSPECIFIED';
/** The proto state of an A2A name the hub has; undefined otherwise (UNSPECIFIED, AUTH_REQUIRED, junk). */
export const stateOfA2AName = (name: string): TaskState | undefined => byA2A.get(name)?.state;

/** Terminal: nothing moves the task again. */
export const FINAL: ReadonlySet<StateWord> = new Set(['completed', 'failed', 'canceled', 'rejected']);
/** Interrupted: the task waits for its sender; blocking sends return and A2A streams end here. */
export const INTERRUPTED: ReadonlySet<StateWord> = new Set(['input-required']);
/** Open: the recipient may update the task, the sender cancel or continue it. */
export const UPDATABLE: ReadonlySet<StateWord> = new Set(['submitted', 'working', 'input-required']);
/** In flight: counted against the sender's tasks_in_flight_per_sender quota (input-required waits on the sender, so it is not). */
export const IN_FLIGHT: ReadonlySet<StateWord> = new Set(['submitted', 'working']);
/** What the recipient may move an open task to (`x-hub/tasks.update`); canceling is the sender's. */
export const UPDATE_TARGETS: ReadonlySet<StateWord> = new Set(['working', 'input-required', 'completed', 'failed', 'rejected']);

const has = (set: ReadonlySet<StateWord>) => (state: TaskState | StateWord): boolean => {
  const word = typeof state === 'string' ? state : wordOf(state);
  return word !== undefined && set.has(word);
};
/** Whether a state (proto value or word) is in FINAL. */
export const isFinal = has(FINAL);
/** Whether a state is FINAL or INTERRUPTED: a waiter has its answer. */
export const isSettled = (state: TaskState | StateWord): boolean => isFinal(state) || has(INTERRUPTED)(state);
