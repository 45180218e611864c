import type { ColumnType } from 'kysely';

/** A JSON column: read as the parsed value, written as its JSON text (a leaf the schema parts share). */
export type Json<T> = ColumnType<T, string, string>;
