// Implements: shared plugin blocks (filled as plugins need them).
namespace aobench::common {}
