// The PostgreSQL test fixture (postgres_server.h) on a real PostgreSQL 15: it starts, libpq connects to its database
// through the socket and reads back what was written, and nothing is left once it is gone.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <filesystem>
#include <memory>
#include <string>

#include "postgres_server.h"

namespace ampwb::test {
namespace {

using Connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

Result exec(PGconn* conn, const std::string& sql) { return Result(PQexec(conn, sql.c_str()), &PQclear); }

TEST(PostgresServer, StartsAcceptsAQueryAndStops) {
  std::filesystem::path socket, folder;
  {
    PostgresServer server("ampwb_fixture");
    socket = server.socket_file();
    folder = server.socket_folder();
    EXPECT_TRUE(std::filesystem::exists(socket));
    EXPECT_NE(server.uri().find("host=" + folder.string()), std::string::npos) << server.uri();

    Connection conn(PQconnectdb(server.uri().c_str()), &PQfinish);
    ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
    for (const char* sql : {"CREATE TABLE runs (id integer PRIMARY KEY, mode text NOT NULL, loss double precision)",
                            "INSERT INTO runs VALUES (1, 'fp32', 0.5), (2, 'amp-bf16', 0.25)"}) {
      const Result r = exec(conn.get(), sql);
      ASSERT_EQ(PQresultStatus(r.get()), PGRES_COMMAND_OK) << sql << ": " << PQresultErrorMessage(r.get());
    }
    const Result rows = exec(conn.get(), "SELECT id, mode, loss * 2, current_database() FROM runs ORDER BY id");
    ASSERT_EQ(PQresultStatus(rows.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(rows.get());
    ASSERT_EQ(PQntuples(rows.get()), 2);
    EXPECT_STREQ(PQgetvalue(rows.get(), 0, 0), "1");
    EXPECT_STREQ(PQgetvalue(rows.get(), 0, 1), "fp32");
    EXPECT_STREQ(PQgetvalue(rows.get(), 0, 2), "1");
    EXPECT_STREQ(PQgetvalue(rows.get(), 1, 1), "amp-bf16");
    EXPECT_STREQ(PQgetvalue(rows.get(), 1, 2), "0.5");
    EXPECT_STREQ(PQgetvalue(rows.get(), 0, 3), "ampwb_fixture");
    // A Unix socket only: a test server must not be reachable from the network.
    const Result listen = exec(conn.get(), "SHOW listen_addresses");
    ASSERT_EQ(PQresultStatus(listen.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(listen.get());
    EXPECT_STREQ(PQgetvalue(listen.get(), 0, 0), "");
  }
  EXPECT_FALSE(std::filesystem::exists(socket)) << "the server still runs";
  EXPECT_FALSE(std::filesystem::exists(folder)) << "its folder is left behind";
}

}  // namespace
}  // namespace ampwb::test
