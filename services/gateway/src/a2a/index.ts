/**
 * The strict A2A 1.0 face of the gateway: a JSON-RPC handler for `POST /agents/{agentId}/a2a/v1`
 * (ProtoJSON, A2A's error codes, `A2A-Version: 1.0` required), its method table, and the Agent
 * Cards that advertise it.
 */
export { A2A_ERRORS, checkA2aVersion } from './handler.js';
export { a2aMethods } from './methods.js';
export { agentCards, cardResponse, hubCard, strictEndpoint, type CardResponse } from './cards.js';
export { A2aCode, toA2aRpcError } from './errors.js';
