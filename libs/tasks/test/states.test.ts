import { messagingv1 } from '@agenthub/proto';
import { TaskState as SdkTaskState } from '@a2a-js/sdk';
import {
  a2aNameOf,
  acceptsAny,
  FINAL,
  INTERRUPTED,
  isFinal,
  isJsonType,
  isSettled,
  STATES,
  stateFromAgent,
  stateOfA2AName,
  stateOfWord,
  UPDATABLE,
  UPDATE_TARGETS,
  wordOf,
} from '@agenthub/tasks';

const { TaskState } = messagingv1;

describe('the state table', () => {
  it('names every proto state once, in each dialect, and reads each name back', () => {
    const protoStates = Object.values(TaskState).filter((v): v is messagingv1.TaskState => typeof v === 'number' && v !== TaskState.UNSPECIFIED);
    expect(STATES.map((s) => s.state).sort()).toEqual(protoStates.sort());
    for (const { state, word, a2a } of STATES) {
      expect([wordOf(state), stateOfWord(word), a2aNameOf(state), stateOfA2AName(a2a)]).toEqual([word, state, a2a, state]);
      // The A2A name is the SDK's too (the numbers differ: only names cross the wire).
      expect(SdkTaskState[a2a as keyof typeof SdkTaskState]).toEqual(expect.any(Number));
    }
    expect([wordOf(TaskState.UNSPECIFIED), stateOfWord('done'), stateOfA2AName('TASK_STATE_UNSPECIFIED'), stateOfA2AName('UNRECOGNIZED')]).toEqual([undefined, undefined, undefined, undefined]);
  });

  it.each([
    ['submitted', false, false, true, false],
    ['working', false, false, true, true],
    ['input-required', false, true, true, true],
    ['completed', true, false, false, true],
    ['failed', true, false, false, true],
    ['canceled', true, false, false, false],
    ['rejected', true, false, false, true],
  ] as const)('%s: final %s, interrupted %s, updatable %s, a recipient\'s target %s', (word, final, interrupted, updatable, target) => {
    expect([FINAL.has(word), INTERRUPTED.has(word), UPDATABLE.has(word), UPDATE_TARGETS.has(word)]).toEqual([final, interrupted, updatable, target]);
    expect([isFinal(stateOfWord(word)!), isSettled(word)]).toEqual([final, final || interrupted]);
  });

  it.each([
    [SdkTaskState.TASK_STATE_SUBMITTED, 'working'],
    [SdkTaskState.TASK_STATE_WORKING, 'working'],
    [SdkTaskState.TASK_STATE_INPUT_REQUIRED, 'input-required'],
    [SdkTaskState.TASK_STATE_AUTH_REQUIRED, 'input-required'],
    [SdkTaskState.TASK_STATE_COMPLETED, 'completed'],
    [SdkTaskState.TASK_STATE_FAILED, 'failed'],
    [SdkTaskState.TASK_STATE_CANCELED, 'canceled'],
    [SdkTaskState.TASK_STATE_REJECTED, 'rejected'],
    [SdkTaskState.TASK_STATE_UNSPECIFIED, 'working'],
  ])('an agent\'s own state %s is the hub\'s %s', (agentState, word) => {
    expect(stateFromAgent(agentState)).toBe(word);
  });
});

describe('media types', () => {
  it.each([
    [['*/*'], ['application/json'], true],
    [['application/*'], ['application/json'], true],
    [['text/plain; charset=utf-8'], ['text/plain'], true],
    [['text/plain'], ['text/plain;format=flowed'], true],
    [['Text/Plain'], ['text/PLAIN'], true],
    [['image/png'], ['image/*'], true],
    [['image/png'], ['*/*'], true],
    [[], ['text/plain'], true],
    [['image/png'], [], true],
    [['image/*'], ['text/plain', 'application/json'], false],
    [['text/plain'], ['text/markdown'], false],
    [['text'], ['text/plain'], false],
  ])('accepting %j from an agent producing %j: %s', (accepted, produced, expected) => {
    expect(acceptsAny(accepted, produced)).toBe(expected);
  });

  it.each([
    ['application/json', true],
    ['application/vnd.api+json; charset=utf-8', true],
    ['Application/JSON', true],
    ['text/json', false],
    ['application/jsonl', false],
  ])('%s is JSON: %s', (type, expected) => {
    expect(isJsonType(type)).toBe(expected);
  });
});
