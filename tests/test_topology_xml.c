/* -fsdp_topology FILE under each of hwloc's XML parsers: libxml2 (the
   libhwloc-plugins package) rejects a malformed file when it is set, hwloc's
   own minimal parser only when it is loaded.  Either way the error is the same
   one, naming the option, the file and the reason, on every rank; and a good
   file loads under both.  -xml_parser sets HWLOC_LIBXML_IMPORT before hwloc
   first reads it; where libxml2 is absent hwloc falls back to the minimal one,
   and the run says so.
   mpitest: -n 3 -xml_parser minimal
   mpitest: -n 3 -xml_parser libxml2 */
#include "fsdp_config.h" /* FSDP_HAVE_HWLOC */
#include "testutil.h"

#if FSDP_HAVE_HWLOC
#include <hwloc.h>

static int rank;
static char dir[200];

static const char *write_file(const char *name, const char *text)
{
  static char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (rank == 0) {
    FILE *f = fopen(path, "w");
    TEST_ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

/* Which parser hwloc uses in this process: only libxml2 refuses a truncated file already at set time. */
static const char *parser_in_use(const char *truncated)
{
  hwloc_topology_t t;
  int refused;
  TEST_ASSERT(hwloc_topology_init(&t) == 0, "hwloc_topology_init failed");
  refused = hwloc_topology_set_xml(t, truncated) != 0;
  hwloc_topology_destroy(t);
  return refused ? "libxml2" : "minimal";
}

/* SetUp with -fsdp_topology path fails on every rank with the same message, which names the option, file and reason. */
static void expect_unreadable(const char *path)
{
  ShardGroup g;
  const char *msg;
  char expected[512], root[1024];

  TEST_OK(FSDPOptionsSetValue("-fsdp_topology", path));
  TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
  TEST_OK(ShardGroupSetFromOptions(g));
  TEST_CODE(FSDP_ERR_HWLOC, ShardGroupSetUp(g));
  FSDPGetLastError(NULL, &msg, NULL);
  snprintf(expected, sizeof expected, "-fsdp_topology '%s': hwloc cannot read it as an XML topology: ", path);
  TEST_ASSERT(strstr(msg, expected), "message '%s' does not contain '%s'", msg, expected);
  TEST_ASSERT(strstr(msg, "not well-formed XML, or not hwloc's format (HWLOC_XML_VERBOSE=1 prints hwloc's reason)"),
              "message '%s' does not give the reason and how to see hwloc's own", msg);
  /* Rank 0 read the file; the others report its error as "on rank 0: ...". */
  snprintf(root, sizeof root, "%s", msg);
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  TEST_ASSERT(!strncmp(msg, "on rank 0: ", rank ? 11 : 0) && !strcmp(msg + (rank ? 11 : 0), root),
              "rank 0 says '%s', this rank '%s'", root, msg);
  TEST_OK(ShardGroupDestroy(&g));
}

int main(int argc, char **argv)
{
  const char *requested = NULL, *in_use, *tmp = getenv("TMPDIR"), *srcdir = getenv("srcdir");
  char good[1024];
  ShardGroup g;
  int local_rank, device;

  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "-xml_parser")) requested = argv[i + 1];
  TEST_ASSERT(requested && (!strcmp(requested, "minimal") || !strcmp(requested, "libxml2")),
              "usage: test_topology_xml -xml_parser minimal|libxml2");
  /* Read once by hwloc, at its first XML import: before anything loads a topology. */
  setenv("HWLOC_LIBXML_IMPORT", strcmp(requested, "libxml2") ? "0" : "1", 1);
  TEST_OK(FSDPInitialize(&argc, &argv));
  TEST_OK(FSDPSetErrorMode(FSDP_ERRORS_RETURN));
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/fsdp-test-xml-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    TEST_ASSERT(mkdtemp(dir), "cannot make a directory %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);

  in_use = parser_in_use(write_file("truncated.xml", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                                                     "  <object type=\"Machine\""));
  if (!strcmp(requested, "minimal"))
    TEST_ASSERT(!strcmp(in_use, "minimal"), "HWLOC_LIBXML_IMPORT=0 did not select hwloc's minimal parser");
  else if (strcmp(in_use, "libxml2") && rank == 0)
    printf("test_topology_xml: hwloc has no libxml2 parser here (Debian's libhwloc-plugins is not installed); "
           "this run used the minimal one\n");
  if (rank == 0) printf("test_topology_xml: hwloc's %s XML parser\n", in_use);

  /* Truncated, not XML at all, empty, and well-formed XML that is not a topology. */
  expect_unreadable(write_file("truncated.xml", "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
                                                "  <object type=\"Machine\""));
  expect_unreadable(write_file("garbage.xml", "pack:2 core:2\n"));
  expect_unreadable(write_file("empty.xml", ""));
  expect_unreadable(write_file("other.xml", "<?xml version=\"1.0\"?>\n<inventory><item/></inventory>\n"));

  /* A topology exported by hwloc loads under either parser. */
  snprintf(good, sizeof good, "%s/tests/topologies/2socket-2gpu.xml", srcdir ? srcdir : ".");
  TEST_OK(FSDPOptionsSetValue("-fsdp_topology", good));
  TEST_OK(ShardGroupCreate(MPI_COMM_WORLD, &g));
  TEST_OK(ShardGroupSetFromOptions(g));
  TEST_OK(ShardGroupSetUp(g));
  TEST_OK(ShardGroupGetLocalRank(g, &local_rank, NULL));
  TEST_OK(ShardGroupGetDevice(g, &device, NULL));
  TEST_ASSERT(device == local_rank % 2, "%s has 2 GPUs: local rank %d got GPU %d, expected %d", good, local_rank,
              device, local_rank % 2);
  TEST_OK(ShardGroupDestroy(&g));

  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const char *names[] = {"truncated.xml", "garbage.xml", "empty.xml", "other.xml"};
    char path[256];
    for (int i = 0; i < 4; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, names[i]);
      remove(path);
    }
    TEST_ASSERT(rmdir(dir) == 0, "cannot remove %s", dir);
  }
  TEST_OK(FSDPFinalize());
  return 0;
}
#else
int main(void)
{
  printf("test_topology_xml: SKIP: built --without-hwloc, so -fsdp_topology is not read\n");
  return 77;
}
#endif
