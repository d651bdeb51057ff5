/**
 * The memory types of the interface specification, in its order, with their intended use.
 * ListMemoryTypes returns them as they are, and memories are typed by them.
 */
export const MEMORY_TYPES = [
  { type: 'fact', description: 'Objective information.' },
  { type: 'decision', description: 'Choices made.' },
  { type: 'preference', description: 'Preferences.' },
  { type: 'todo', description: 'Action items.' },
  { type: 'context', description: 'Background information.' },
  { type: 'reference', description: 'Links and resources.' },
] as const;

export type MemoryType = (typeof MEMORY_TYPES)[number]['type'];
