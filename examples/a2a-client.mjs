// A standard A2A 1.0 client (@a2a-js/sdk) talking to an agent through AgentHub, from nothing but
// the agent's Agent Card URL and the caller's API key: one blocking exchange, one streaming.
//
//   node examples/a2a-client.mjs http://127.0.0.1:8080/agents/<agent id>/.well-known/agent-card.json <api key>
//
// The agent must answer: a connected agent (examples/echo-agent.mjs, or one polling x-hub/inbox.poll as
// in the README), or a push agent.
import { Role } from '@a2a-js/sdk';
import { ClientFactory, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const [cardUrl, apiKey] = process.argv.slice(2);
if (!cardUrl || !apiKey) {
  console.error('usage: node examples/a2a-client.mjs <agent card URL> <API key>');
  process.exit(2);
}

// The hub authenticates every call with the caller's API key as a bearer token.
const fetchImpl = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set('Authorization', `Bearer ${apiKey}`);
  return fetch(input, { ...init, headers });
};
const client = await new ClientFactory({ transports: [new JsonRpcTransportFactory({ fetchImpl })] }).createFromUrl(cardUrl, '');

const request = (text) => ({
  tenant: '',
  message: {
    messageId: crypto.randomUUID(),
    contextId: '',
    taskId: '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  },
  configuration: { acceptedOutputModes: [], taskPushNotificationConfig: undefined, historyLength: undefined, returnImmediately: false },
  metadata: undefined,
});

const task = await client.sendMessage(request('What is 6 × 7?'));
console.log('blocking:', JSON.stringify(task, null, 1).slice(0, 2000));

for await (const event of client.sendMessageStream(request('Stream the answer, please'))) {
  console.log('stream event:', JSON.stringify(event).slice(0, 500));
}
