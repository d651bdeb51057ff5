import { z } from 'zod';
import { HubError, Reason } from '@agenthub/runtime';
import { parseParams } from '../src/params.js';

function problem(schema: z.ZodType, params: unknown): HubError {
  try {
    parseParams(schema, params);
  } catch (err) {
    return err as HubError;
  }
  throw new Error('expected the params to be refused');
}

describe('parseParams', () => {
  const schema = z.object({
    name: z.string().trim().min(1).max(5),
    role: z.enum(['read', 'write']),
    tags: z.array(z.string()).max(2).optional(),
    nested: z.object({ limit: z.number().int() }).optional(),
  });

  it('returns the parsed params', () => {
    expect(parseParams(schema, { name: ' ab ', role: 'read' })).toEqual({ name: 'ab', role: 'read' });
  });

  it.each([
    [{ role: 'read' }, 'name', 'Invalid params: name is required'],
    [{ name: 3, role: 'read' }, 'name', 'Invalid params: name must be a string'],
    [{ name: '   ', role: 'read' }, 'name', 'Invalid params: name must not be empty'],
    [{ name: 'abcdefg', role: 'read' }, 'name', 'Invalid params: name must be at most 5 characters'],
    [{ name: 'a', role: 'owner' }, 'role', 'Invalid params: role must be one of read, write'],
    [{ name: 'a', role: 'read', tags: ['x', 'y', 'z'] }, 'tags', 'Invalid params: tags must have at most 2 items'],
    [{ name: 'a', role: 'read', nested: { limit: 1.5 } }, 'nested.limit', 'Invalid params: nested.limit must be an integer'],
  ])('names the field at fault in %j', (params, field, message) => {
    const err = problem(schema, params);
    expect(err.reason).toBe(Reason.INVALID_PARAMS);
    expect(err.field).toBe(field);
    expect(err.message).toBe(message);
  });
});
