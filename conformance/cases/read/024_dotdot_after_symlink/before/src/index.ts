src
