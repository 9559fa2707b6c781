// A fixture for tools/check_test_names.cmake: a name it must report.
TEST_CASE("two clauses; one name")
{
}
