// TODO: parse flags
int main(void) { return 0; }
