int f(void) {
    /* TODO: handle timeouts */
    return 0;
}
