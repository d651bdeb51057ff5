/**
 * The hub's one task model, shared by the gateway and the messaging service: task states and
 * their lifecycle sets, and the mapping of parts between the hub's proto and each wire dialect.
 */

/** The state table (proto value ↔ interface word ↔ A2A name) and the lifecycle sets over it. */
export {
  A2A_STATE_NAMES,
  FINAL,
  INTERRUPTED,
  STATE_WORDS,
  STATES,
  UPDATABLE,
  IN_FLIGHT,
  UPDATE_TARGETS,
  a2aNameOf,
  isFinal,
  isSettled,
  stateOfA2AName,
  stateOfWord,
  wordOf,
  type StateWord,
} from './states.js';
/** HTTP media-type matching: content negotiation of output modes, JSON media types. */
export { acceptsAny, essence, isJsonType, rangeCovers } from './media-types.js';
/** Hub part ↔ A2A part (encoding-independent); the ProtoJSON and SDK codecs go through it. */
export {
  DEFAULT_DATA_TYPE,
  DEFAULT_FILE_TYPE,
  TEXT_PLAIN,
  dataPart,
  filePart,
  fromA2A,
  textPart,
  toA2A,
  type A2AContent,
  type A2APart,
  type DecodeOptions,
  type Part,
} from './parts.js';
/** The interface's dialect (`kind`-tagged parts): lossless both ways. */
export { partFromInterface, partToInterface } from './codecs/interface.js';
/** A JSON object, as the dialect codecs produce. */
export type { Json } from './codecs/read.js';
/** A2A 1.0 ProtoJSON (the strict endpoint). Decoders name the bad field through `DecodeOptions.invalid`. */
export { a2aPartFromProtoJson, a2aPartToProtoJson, partFromProtoJson, partToProtoJson } from './codecs/protojson.js';
/** `@a2a-js/sdk` objects (the push worker), and the hub state of an agent's task state. */
export { a2aPartFromSdk, a2aPartToSdk, partFromSdk, partToSdk, stateFromAgent } from './codecs/sdk.js';
