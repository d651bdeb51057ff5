import { toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { configureTextEncoding, getTextEncoding } from '@bufbuild/protobuf/wire';

// protobuf-es writes each string through TextEncoder.encode, which allocates a buffer of its own
// per string: three times what Buffer.from costs for the short ids, roles and signatures our
// messages carry (Buffer cuts them from a shared pool). The writer copies every chunk into the
// message's own bytes when it finishes, so a pooled chunk never outlives the encoding.
// Decoding stays the standard one, which checks UTF-8 where protobuf requires it.
configureTextEncoding({ ...getTextEncoding(), encodeUtf8: (text) => Buffer.from(text, 'utf8') });

/** A message's wire bytes as the Buffer grpc-js sends, without copying them again. */
export function encodeMessage<D extends DescMessage>(schema: D, message: MessageShape<D>): Buffer {
  const bytes = toBinary(schema, message);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
