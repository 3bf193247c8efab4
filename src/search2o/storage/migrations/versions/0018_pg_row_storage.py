"""PostgreSQL only: rows of ``chunks`` and ``memories`` stay inline; finer lexeme statistics.

* ``toast_tuple_target = 8160`` on ``chunks`` and ``memories``. PostgreSQL moves a row's largest
  values out of line (TOAST) once the row passes about 2 KB (PostgreSQL manual 73.2, "TOAST",
  and CREATE TABLE, "toast_tuple_target"). A chunk row (text plus its ``tsvector``) and a memory
  row (a 384-dimension vector is 1.5 KB) often pass it, and every ``ts_rank`` or cosine then
  fetched the value from the TOAST table: at 500 memories the candidates statement ran 2.2 ms
  with 530 buffer reads, 1.0 ms with 90 once the rows were inline. Rows up to a page stay
  inline; larger ones (vectors of 3,000 dimensions) are still TOASTed.
* ``SET STATISTICS 1000`` on ``chunks.search_vector``: ANALYZE then keeps up to 10,000 common
  lexemes (ten per unit of the target; ``ts_typanalyze.c``) instead of 1,000. Lexical search
  leaves out a term found in more than 1 % of the chunks
  (:class:`search2o.storage.lexical.CommonTerms`) and reads those frequencies from
  ``pg_stats``; with the default target a 100,000-chunk corpus listed no lexeme under 1.5 %,
  so terms in 1.0-1.5 % of the chunks counted as rare and were ranked row by row.

The settings apply to rows written from now on; ``VACUUM FULL chunks, memories`` (a table
lock) moves existing rows inline at once. Going down restores PostgreSQL's defaults. SQLite
has neither setting: nothing changes there.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

INLINE_TARGET = 8160
"""Bytes: the largest value PostgreSQL accepts, a heap page less its header."""
LEXEME_STATISTICS = 1000


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in ("chunks", "memories"):
        op.execute(f"ALTER TABLE {table} SET (toast_tuple_target = {INLINE_TARGET})")
    op.execute(f"ALTER TABLE chunks ALTER COLUMN search_vector SET STATISTICS {LEXEME_STATISTICS}")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE chunks ALTER COLUMN search_vector SET STATISTICS -1")
    for table in ("chunks", "memories"):
        op.execute(f"ALTER TABLE {table} RESET (toast_tuple_target)")
