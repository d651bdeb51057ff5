import { HubError, Reason, type CallContext } from '@agenthub/runtime';
import { testLogger } from '@agenthub/testing';
import { resolveAccess, type SecretsEnv } from '../src/access.js';

/**
 * A deleted workspace is told apart by the workspace service's reason alone: ResolveAccess
 * answers NOT_FOUND for nothing else, so its message may say anything.
 */

const ctx: CallContext = { principal: undefined, deadline: undefined, signal: new AbortController().signal, log: testLogger() };

function env(answer: HubError): { env: SecretsEnv; destroyed: string[] } {
  const destroyed: string[] = [];
  const store = {
    async destroyWorkspace(_signal: AbortSignal, workspaceId: string) {
      destroyed.push(workspaceId);
      return { destroyed: true, secretsDeleted: 1 };
    },
  };
  const workspace = {
    async resolveAccess(): Promise<never> {
      throw answer;
    },
  };
  return { env: { store, workspace } as unknown as SecretsEnv, destroyed };
}

describe('resolveAccess in the secrets service', () => {
  it('destroys the key of a workspace the workspace service reports NOT_FOUND, whatever the message, and passes the error on', async () => {
    const gone = new HubError(Reason.NOT_FOUND, 'No workspace by that id');
    const { env: e, destroyed } = env(gone);
    await expect(resolveAccess(e, ctx, 'ws_gone')).rejects.toBe(gone);
    expect(destroyed).toEqual(['ws_gone']);
  });

  it('destroys nothing on any other refusal, even one whose message reads like a missing workspace', async () => {
    const denied = new HubError(Reason.ACCESS_DENIED, 'Workspace not found');
    const { env: e, destroyed } = env(denied);
    await expect(resolveAccess(e, ctx, 'ws_kept')).rejects.toBe(denied);
    expect(destroyed).toEqual([]);
  });
});
