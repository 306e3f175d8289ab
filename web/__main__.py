from web.server import main

main()
