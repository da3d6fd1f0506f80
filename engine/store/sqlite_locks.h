// SQLite's locks on the run store, held so that no other code in this process can drop them.
//
// SQLite's unix VFS locks with POSIX record locks (fcntl F_SETLK), which belong to the process: when any code in it
// opens and closes another descriptor of the database or its -shm file (a file dialog sniffing a MIME type, a
// completer listing the folder, a library reading a header), every lock SQLite held on that file is silently gone.
// Another process closing its connection then takes itself for the last one and deletes the -wal and -shm files
// this process still writes into, or resets the shared index under its readers: runs are lost ("How To Corrupt An
// SQLite Database File", section 2.2). Open file description locks (F_OFD_SETLK, Linux 3.15) belong to the
// descriptor SQLite opened and end only when that descriptor closes; they conflict with POSIX locks, so other
// programs' SQLite (the sqlite3 shell, Python) still sees them.
#pragma once

namespace ampwb {

// Makes SQLite's unix VFS take open file description locks instead of POSIX ones, once, before the process opens
// its first connection (SqliteDb's constructor calls it). False where the kernel or the SQLite library cannot.
bool sqlite_locks_survive_other_descriptors();

}  // namespace ampwb
