"""Which errors mean "the disk is read-only, denied or full" (and stop an ingest at once):
the OS's, and DuckDB's I/O, commit and checkpoint errors about a file it could not write;
never a conversion error that quotes a value worded like one (a hostile line's)."""
from __future__ import annotations

import errno

import duckdb
import pytest

from warehouse.errors import disk_errno


@pytest.mark.parametrize("exc,code", [
    (duckdb.IOException('IO Error: Could not write file "/d/main/nodes/x.parquet": No space left on device'),
     errno.ENOSPC),
    (duckdb.TransactionException('TransactionContext Error: Failed to commit: Could not write file '
                                 '"/d/wh.duckdb.wal": No space left on device'), errno.ENOSPC),
    (duckdb.FatalException('FATAL Error: Failed to create checkpoint because of error: Could not write '
                           'file "/d/wh.duckdb": No space left on device'), errno.ENOSPC),
    (duckdb.IOException('IO Error: Cannot open file "/ro/wh.duckdb": Read-only file system'), errno.EROFS),
    (duckdb.IOException('IO Error: Cannot open file "/x/wh.duckdb": Permission denied'), errno.EACCES),
    (OSError(errno.EROFS, "Read-only file system"), errno.EROFS),
    (OSError(errno.EPERM, "Operation not permitted"), errno.EACCES),
    (OSError(errno.ENOSPC, "No space left on device"), errno.ENOSPC),
])
def test_disk_errors_are_recognised(exc, code):
    assert disk_errno(exc) == code


@pytest.mark.parametrize("exc", [
    duckdb.ConversionException('Conversion Error: Could not convert string \'"/x": No space left on '
                               'device\' to INT32'),
    duckdb.InvalidInputException('Invalid Input Error: Malformed JSON: "/a": Permission denied'),
    duckdb.IOException('IO Error: Could not set lock on file "/wh.duckdb": Conflicting lock is held'),
    OSError(errno.ENOENT, "No such file or directory"),
    ValueError("No space left on device"),
])
def test_other_errors_are_not(exc):
    assert disk_errno(exc) is None
